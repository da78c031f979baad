package dashboard_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A completed task's page shows its result, escaped: a result that carries markup is shown as
// text. A task without a result has no result section.
func TestTaskPageShowsResult(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := t.Context()
	var with, without int64
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('r', '{}')`).Scan(&with))
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('r', '{}')`).Scan(&without))
	_, err := pool.Exec(ctx, `select queues.claim_tasks('w', 2)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select * from queues.complete_tasks_with_results(
			array(select task_id from queues.task where task_id in ($1, $2) order by task_id),
			array(select lease_id from queues.task where task_id in ($1, $2) order by task_id),
			array['{"html": "<script>alert(1)</script>", "n": 42}', null]::jsonb[])`, with, without)
	require.NoError(t, err)

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: -1})
	require.NoError(t, err)
	base := newServer(t, h).URL
	hc := browserlessClient(t)

	code, body, _ := get(t, hc, base+"/tasks/"+itoa(with), bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<h2 id="result">Result</h2>`)
	require.Contains(t, body, `&lt;script&gt;alert(1)&lt;/script&gt;`)
	require.NotContains(t, body, `<script>alert(1)</script>`)
	require.Contains(t, body, `42`)

	code, body, _ = get(t, hc, base+"/tasks/"+itoa(without), bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, `<h2 id="result">`)
}
