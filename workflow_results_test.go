package taskorch_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// wfResultsSQL is a db_function child that returns its parents' results, read with
// queues.parent_results(queues.current_task_id()) in its lease-locked transaction.
const wfResultsSQL = `
create schema wfres;
create function wfres.collect(jsonb) returns jsonb
language sql security invoker set search_path = pg_catalog, pg_temp as $$
    select jsonb_build_object('status', 'succeeded', 'payload',
        (select jsonb_agg(jsonb_build_object('id', r.parent_id, 'status', r.status, 'result', r.result) order by r.parent_id)
         from queues.parent_results(queues.current_task_id()) r))
$$;
revoke all on function wfres.collect(jsonb) from public;
grant usage on schema wfres to worker_service_user;
grant execute on function wfres.collect(jsonb) to worker_service_user;
`

// Results flow to children: two parents run by a worker return results; a Go child sees its
// parents' ids on its Task and reads their results with Client.ParentResults, and a db_function
// child reads them in SQL with queues.parent_results(queues.current_task_id()) — each as
// committed with the parent's completion.
func TestWorkflowParentResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, wfResultsSQL)

	var mu sync.Mutex
	var seenParents []int64
	var seenResults []taskorch.ParentResult
	hs := taskorch.NewHandlers()
	hs.HandleFunc("wf.parent", func(ctx context.Context, task *taskorch.Task) error {
		return taskorch.SetResult(ctx, map[string]int64{"from": task.ID})
	})
	hs.HandleFunc("wf.child", func(ctx context.Context, task *taskorch.Task) error {
		rs, err := c.ParentResults(ctx, task.ID)
		mu.Lock()
		defer mu.Unlock()
		seenParents, seenResults = task.ParentIDs, rs
		return err
	})

	p1 := scalar[int64](t, pool, `select queues.enqueue('wf.parent', '{}')`)
	p2 := scalar[int64](t, pool, `select queues.enqueue('wf.parent', '{}')`)
	goChild := enqueueAfter(t, pool, "wf.child", "cancel", p2, p1)
	sqlChild := scalar[int64](t, pool, `select queues.enqueue('db_function', '{"db_function": "wfres.collect"}', _after => $1)`, []int64{p1, p2})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	waitStatus(t, pool, goChild, taskorch.StatusCompleted)
	waitStatus(t, pool, sqlChild, taskorch.StatusCompleted)

	res := func(id int64) json.RawMessage { return json.RawMessage(`{"from": ` + jsonInt(id) + `}`) }
	mu.Lock()
	require.Equal(t, []int64{p1, p2}, seenParents)
	require.Len(t, seenResults, 2)
	for i, p := range []int64{p1, p2} {
		require.Equal(t, p, seenResults[i].ID)
		require.Equal(t, taskorch.StatusCompleted, seenResults[i].Status)
		require.JSONEq(t, string(res(p)), string(seenResults[i].Result))
	}
	mu.Unlock()

	got, err := c.Get(ctx, sqlChild)
	require.NoError(t, err)
	require.JSONEq(t, `[{"id": `+jsonInt(p1)+`, "status": "completed", "result": `+string(res(p1))+`},
		{"id": `+jsonInt(p2)+`, "status": "completed", "result": `+string(res(p2))+`}]`, string(got.Result))

	// The same through SQL, as the worker role would call it, and for a task without parents.
	require.Equal(t, 2, scalar[int](t, pool, `select count(*) from queues.parent_results($1) where status = 'completed'`, goChild))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.parent_results($1)`, p1))
	rs, err := c.ParentResults(ctx, p1)
	require.NoError(t, err)
	require.Empty(t, rs)
}

// Bad input: queues.parent_results refuses a NULL id (22023) and an unknown one (P0002);
// queues.current_task_id() is NULL outside a task's transaction; Client.ParentResults of an
// unknown id is ErrNotFound. A parent deleted since (retention) is listed without status.
func TestWorkflowParentResultsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	for sql, code := range map[string]string{
		`select * from queues.parent_results(null)`:                     "22023",
		`select * from queues.parent_results(987654321)`:                "P0002",
		`select * from queues.parent_results(queues.current_task_id())`: "22023",
	} {
		_, err := pool.Exec(ctx, sql)
		var pe *pgconn.PgError
		require.True(t, errors.As(err, &pe), "%s: %v", sql, err)
		require.Equal(t, code, pe.Code, sql)
		require.Contains(t, pe.Message, "parent_results: ", sql)
	}
	require.Nil(t, scalar[*int64](t, pool, `select queues.current_task_id()`))
	_, err := c.ParentResults(ctx, 987654321)
	require.ErrorIs(t, err, taskorch.ErrNotFound)

	p := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	mustExec(t, pool, `select queues.cancel_task($1)`, p)
	child := enqueueAfter(t, pool, "wf.c", "run", p)
	mustExec(t, pool, `select queues.delete_tasks(array[$1::bigint])`, p)
	rs, err := c.ParentResults(ctx, child)
	require.NoError(t, err)
	require.Equal(t, []taskorch.ParentResult{{ID: p}}, rs)
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
