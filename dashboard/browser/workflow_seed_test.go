package browser_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// The dashboard tests' seedWorkflow (dashboard/workflow_seed_test.go): keep them in step.

// seededWorkflow names the tasks of seedWorkflow's workflow, whose id is root's.
type seededWorkflow struct {
	root, reserve, receipt, audit, ship, archive int64
}

// edges are the workflow's parent → child edges.
func (w seededWorkflow) edges() [][2]int64 {
	return [][2]int64{
		{w.root, w.reserve}, {w.root, w.receipt}, {w.root, w.audit},
		{w.reserve, w.ship}, {w.receipt, w.ship}, // the fan-in
		{w.receipt, w.archive},
	}
}

// statuses are what seedWorkflow leaves each task in.
func (w seededWorkflow) statuses() map[int64]string {
	return map[int64]string{
		w.root: "completed", w.reserve: "dead", w.receipt: "running", w.audit: "pending",
		w.ship: "cancelled", w.archive: "waiting",
	}
}

// seedWorkflow enqueues a workflow over seed's database (its worker seed-worker registered) and
// drives it, through the queue's own functions, to a task in each status:
//
//	root (wf.charge, completed) → reserve (wf.reserve, dead: its error tries to inject script)
//	                            → receipt (wf.receipt, running)
//	                            → audit (db_function demo.ship_order_supervisor, pending)
//	reserve, receipt → ship (wf.ship, cancelled by the cascade of reserve's death)
//	receipt → archive (wf.archive, waiting)
func seedWorkflow(t *testing.T, pool *pgxpool.Pool) seededWorkflow {
	t.Helper()
	ctx := t.Context()
	q := func(sql string, args ...any) int64 {
		t.Helper()
		var id int64
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&id), sql)
		return id
	}
	after := func(typ string, maxAttempts int, parents ...int64) int64 {
		return q(`select queues.enqueue($1, '{"order": "ORD-<b>1</b>"}'::jsonb, now(), 0, null, $2, $3::bigint[])`, typ, maxAttempts, parents)
	}
	claim := func(id int64) int64 {
		_, err := pool.Exec(ctx, `update queues.task set priority = 1000 where task_id = $1`, id)
		require.NoError(t, err)
		return q(`select lease_id from queues.claim_tasks('seed-worker', 1) where task_id = $1`, id)
	}
	var w seededWorkflow
	w.root = q(`select queues.enqueue('wf.charge', '{"order": "ORD-1"}'::jsonb)`)
	w.reserve = after("wf.reserve", 1, w.root)
	w.receipt = after("wf.receipt", 5, w.root)
	w.audit = q(`select queues.enqueue('db_function', '{"db_function": "demo.ship_order_supervisor"}'::jsonb, now(), 0, null, 5, $1::bigint[])`,
		[]int64{w.root})
	w.ship = after("wf.ship", 5, w.reserve, w.receipt)
	w.archive = after("wf.archive", 5, w.receipt)
	q(`select 1 from queues.complete_task($1, $2)`, w.root, claim(w.root))
	q(`select 1 from queues.fail_task($1, $2, $3)`, w.reserve, "stock service said "+xssNote, claim(w.reserve))
	claim(w.receipt)
	for id, want := range w.statuses() {
		var got string
		require.NoError(t, pool.QueryRow(ctx, `select status::text from queues.task where task_id = $1`, id).Scan(&got))
		require.Equal(t, want, got, "task %d", id)
	}
	return w
}
