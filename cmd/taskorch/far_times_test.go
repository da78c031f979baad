package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A task due since the year 1 (the earliest time the API takes) makes queues list say how long it
// has waited as "more than 100 years", not a duration that overflowed to a negative one; and a
// task due in the year 9999 lists too.
func TestQueuesListFarTimes(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), `select queues.enqueue('far.past', '{}', '0001-01-02 00:00:00+00');
		select queues.enqueue('far.future', '{}', '9999-12-01 00:00:00+00');
		select queues.add_schedule('far-past', '0 3 * * *', 'far.past', _next_run_at => '0001-01-02 00:00:00+00')`)
	require.NoError(t, err)

	r := run(t, append([]string{"queues", "list"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, regexp.MustCompile(`(?m)^far\.past +running +1 +0 +0 +0 +0 +more than 100 years ago +0 · unserved$`), r.out)
	require.Regexp(t, regexp.MustCompile(`(?m)^far\.future +running +0 +1 +0 +0 +0 +- +0$`), r.out)
	for _, args := range [][]string{{"tasks", "list"}, {"schedules", "list"}, {"queues", "list", "--json"}} {
		r := run(t, append(args, db...)...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.err)
	}
}
