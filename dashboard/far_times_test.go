package dashboard_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Tasks and schedules due in the year 1 and in the year 9999 (the bounds the API takes)
// show their wait and their run time as "more than 100 years", never as a duration that
// overflowed.
func TestFarTimesSaturate(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	var past, future int64
	require.NoError(t, pool.QueryRow(t.Context(), `select queues.enqueue('far.past', '{}', '0001-01-02 00:00:00+00')`).Scan(&past))
	require.NoError(t, pool.QueryRow(t.Context(), `select queues.enqueue('far.future', '{}', '9999-12-01 00:00:00+00')`).Scan(&future))
	_, err := pool.Exec(t.Context(), `select queues.add_schedule('far-past', '0 3 * * *', 'far.past', _next_run_at => '0001-01-02 00:00:00+00');
		select queues.add_schedule('far-future', '0 3 * * *', 'far.future', _next_run_at => '9999-12-01 00:00:00+00')`)
	require.NoError(t, err)
	h, err := dashboard.New(pool, dashboard.Config{Token: testToken})
	require.NoError(t, err)
	srv := newServer(t, h)
	c := browserlessClient(t)
	for p, want := range map[string]string{
		"/":                      "more than 100 years",
		"/queues":                "more than 100 years",
		"/tasks/" + itoa(past):   "more than 100 years ago",
		"/tasks/" + itoa(future): "in more than 100 years",
		"/schedules":             "more than 100 years ago",
	} {
		code, body, _ := get(t, c, srv.URL+p, bearer()...)
		require.Equal(t, http.StatusOK, code, p)
		require.Contains(t, body, want, p)
		require.NotContains(t, body, "106751d", p)  // time.Since's saturated 292 years, in days
		require.NotContains(t, body, "-2562047", p) // an overflowed time.Duration, in hours
	}
}
