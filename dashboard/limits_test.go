package dashboard_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/dashboard"
)

// The limits page shows every limit and its buckets in use; a held task's page says which limit
// holds it and why.
func TestLimitsPageAndHeldTask(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	c := browserlessClient(t)
	ctx := t.Context()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	q := func(sql string, args ...any) int64 {
		t.Helper()
		var id int64
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&id))
		return id
	}

	exec(`select queues.set_limit('lim.report', _max_running => 1, _key_field => 'tenant')`)
	exec(`select queues.set_limit('lim.email', _rate_per_second => 0.5)`)
	running := q(`select queues.enqueue('lim.report', '{"tenant": "acme"}')`)
	held := q(`select queues.enqueue('lim.report', '{"tenant": "acme"}')`)
	other := q(`select queues.enqueue('lim.report', '{"tenant": "globex"}')`)
	sent := q(`select queues.enqueue('lim.email', '{}')`)
	waiting := q(`select queues.enqueue('lim.email', '{}')`)
	exec(`select queues.claim_tasks('dash-w', 1, _task_types => array['lim.report'])`)
	exec(`select queues.claim_tasks('dash-w', 5, _task_types => array['lim.email'])`)
	require.Equal(t, "running", scalarText(t, pool, running))
	require.Equal(t, "running", scalarText(t, pool, sent))

	code, body, _ := get(t, c, srv.URL+"/limits", bearer()...)
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		`data-limit="lim.report"`, "at most 1 running per tenant", ">acme<", ">globex<",
		`data-limit="lim.email"`, "0.5/s (burst 1)",
	} {
		require.Contains(t, body, want)
	}

	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(held), bearer()...)
	require.Contains(t, body, "held by limit lim.report: at most 1 running per tenant (tenant acme); 1 of 1 running")
	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(waiting), bearer()...)
	require.Regexp(t, `held by limit lim\.email: 0\.5/s \(burst 1\); next token in [12]\.\d s`, body)
	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(other), bearer()...)
	require.Contains(t, body, "limit lim.report: at most 1 running per tenant (tenant globex); room now")
	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(running), bearer()...)
	require.NotContains(t, body, `id="held-by"`, "a running task is not held")
}

func scalarText(t *testing.T, pool interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(t.Context(), `select status::text from queues.task where task_id = $1`, id).Scan(&s))
	return s
}
