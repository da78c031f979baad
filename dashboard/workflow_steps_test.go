package dashboard_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A durable workflow's task page lists its checkpoints in call order, escaped, with a secret in
// a step's result masked; a task without checkpoints has no steps section.
func TestTaskPageShowsWorkflowSteps(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := t.Context()
	var wf, plain, lease int64
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('signup', '{}')`).Scan(&wf))
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('other', '{}')`).Scan(&plain))
	require.NoError(t, pool.QueryRow(ctx, `select lease_id from queues.claim_tasks_by_id('w', array[$1::bigint], interval '5 minutes', array['signup'])`, wf).Scan(&lease))
	for _, sql := range []string{
		`select recorded from queues.record_workflow_step($1, $2, 1, 'step_tx', 'create-account', '{"account": 7, "password": "pw_LEAK", "note": "<b>x</b>"}')`,
		`select recorded from queues.record_workflow_step($1, $2, 2, 'sleep', 'a-day-later', null, interval '1 day')`,
	} {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, sql, wf, lease).Scan(&ok))
		require.True(t, ok, sql)
	}

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken, RefreshInterval: -1})
	require.NoError(t, err)
	base := newServer(t, h).URL
	hc := browserlessClient(t)

	code, body, _ := get(t, hc, base+"/tasks/"+itoa(wf), bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `id="steps"`)
	require.Regexp(t, `(?s)create-account.*a-day-later`, body)
	require.Contains(t, body, `&lt;b&gt;x&lt;/b&gt;`)
	require.NotContains(t, body, `<b>x</b>`)
	require.NotContains(t, body, `pw_LEAK`)

	code, body, _ = get(t, hc, base+"/tasks/"+itoa(plain), bearer()...)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, `id="steps"`)
}
