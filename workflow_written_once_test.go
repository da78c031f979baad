package taskorch_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A task enqueued after parents without an idempotency key is written once, with what its
// parents make it (docs/workflows.md, "How the release works"): waiting with its counters,
// pending when they all completed, cancelled when one failed under 'cancel'. Through enqueue,
// enqueue_many and the Go client, a transaction counts one insert per task and no update of
// queues.task (pg_stat_xact_user_tables, read before and after: it also holds counts of the
// connection's earlier transactions that are not yet reported); the tasks are the same as the update path made them
// (status, after_ids, policy, counters, workflow, edges, the cancel's event), and a keyed
// enqueue, inserted first, is updated once.
func TestWorkflowTaskWrittenOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	done := scalar[int64](t, pool, `select queues.enqueue('wf.done', '{}')`)
	completeUnder(t, pool, []int64{done}, []int64{claimOne(t, pool, "wf.done", done)})
	gone := scalar[int64](t, pool, `select queues.enqueue('wf.gone', '{}')`)
	mustExec(t, pool, `select queues.cancel_task($1)`, gone)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	writes := func() (ins, upd int64) {
		require.NoError(t, tx.QueryRow(ctx, `select n_tup_ins, n_tup_upd from pg_stat_xact_user_tables
			where relid = 'queues.task'::regclass`).Scan(&ins, &upd))
		return ins, upd
	}
	ins0, upd0 := writes()
	root := scalar[int64](t, tx, `select queues.enqueue('wf.root', '{}')`)
	mid := scalar[[]int64](t, tx, `select queues.enqueue_many(array['wf.mid', 'wf.mid'], array['{}', '{}']::jsonb[], _after => array[$1::bigint])`, root)
	sink := scalar[int64](t, tx, `select queues.enqueue('wf.sink', '{}', _after => $1)`, mid)
	ready := scalar[int64](t, tx, `select queues.enqueue('wf.ready', '{}', _after => array[$1::bigint], _on_parent_failure => 'run')`, done)
	cancelled := scalar[[]int64](t, tx, `select queues.enqueue_many(array['wf.cx', 'wf.cx'], array['{}', '{}']::jsonb[], _after => array[$1::bigint, $2::bigint])`, gone, root)
	goTask, err := c.EnqueueTx(ctx, tx, raw("wf.go", `{"n": 1}`), &taskorch.EnqueueOpts{After: []int64{root, done}})
	require.NoError(t, err)
	ins, upd := writes()
	require.Equal(t, int64(8), ins-ins0)
	require.Equal(t, upd0, upd, "each task written once")

	row := func(id int64) string {
		return scalar[string](t, tx, `select concat_ws(' ', status, after_ids::text, coalesce(on_parent_failure, '-'),
			coalesce(waiting_stripes::text, '-'), coalesce(workflow_id::text, '-'), (cancelled_at is not null)::text,
			(select coalesce(string_agg(parent_id || ':' || stripe, ',' order by parent_id), '-') from queues.task_edge where child_id = t.task_id),
			(select coalesce(string_agg(stripe || ':' || pending, ','), '-') from queues.task_wait_stripe where child_id = t.task_id),
			(select count(*) from queues.workflow_task w where w.task_id = t.task_id))
			from queues.task t where task_id = $1`, id)
	}
	f := fmt.Sprintf
	require.Equal(t, f("waiting {%d} cancel 1 %d false %d:-1 - 1", root, root, root), row(mid[0]))
	require.Equal(t, f("waiting {%d} cancel 1 %d false %d:-1 - 1", root, root, root), row(mid[1]))
	require.Equal(t, f("waiting {%d,%d} cancel 1 %d false %d:0,%d:0 0:2 1", mid[0], mid[1], root, mid[0], mid[1]), row(sink))
	require.Equal(t, f("pending {%d} run - %d false - - 1", done, done), row(ready))
	for _, id := range cancelled {
		require.Equal(t, f("cancelled {%d,%d} cancel - %d true - - 1", gone, root, gone), row(id))
		require.Equal(t, f("cancelled: parent task %d ended cancelled", gone), scalar[string](t, tx,
			`select event || ': ' || detail from queues.task_event where task_id = $1`, id))
	}
	// Two parents, one completed: waiting for the other alone (its edge the counter), in the
	// workflow of the older (done, enqueued first).
	require.Equal(t, f("waiting {%d,%d} cancel 1 %d false %d:-1 - 1", done, root, done, root), row(goTask.TaskID))

	// With a key: inserted, then made to wait by one update.
	keyed := scalar[int64](t, tx, `select queues.enqueue('wf.keyed', '{}', _idempotency_key => 'k', _after => array[$1::bigint])`, root)
	ins, upd = writes()
	require.Equal(t, int64(9), ins-ins0)
	require.Equal(t, int64(1), upd-upd0)
	require.Equal(t, f("waiting {%d} cancel 1 %d false %d:-1 - 1", root, root, root), row(keyed))
	require.NoError(t, tx.Commit(ctx))

	// And they run as before: the root's completion releases the middle tasks, theirs the sink.
	completeUnder(t, pool, []int64{root}, []int64{claimOne(t, pool, "wf.root", root)})
	require.Equal(t, "pending pending waiting", scalar[string](t, pool,
		`select string_agg(status::text, ' ' order by task_id) from queues.task where task_id = any ($1)`, append(mid, sink)))
}
