package bench_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/bench"
)

// bench workflow runs the independent tasks and then the diamonds, every task of both completed,
// each diamond's sink after its two middle tasks and those after its root; it reports both
// rates and their ratio under the documented JSON keys.
func TestWorkflow(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Workflow(t.Context(), e, bench.WorkflowConfig{
		Diamonds: 300, Rounds: 2, WorkerOptions: bench.WorkerOptions{Workers: 2, Concurrency: 20},
	})
	require.NoError(t, err)
	require.EqualValues(t, 1200, r.Baseline.Tasks)
	require.EqualValues(t, 1200, r.Workflow.Tasks)
	require.Len(t, r.BaselineRuns, 2)
	require.Len(t, r.WorkflowRuns, 2)
	// The medians (of two: the lower) are runs of their side, and the ratio is theirs.
	require.Equal(t, min(r.BaselineRuns[0], r.BaselineRuns[1]), r.BaselineTasksPerSecond)
	require.Equal(t, min(r.WorkflowRuns[0], r.WorkflowRuns[1]), r.WorkflowTasksPerSecond)
	require.Equal(t, r.BaselineTasksPerSecond, r.Baseline.TasksPerSecond)
	require.Positive(t, r.WorkflowTasksPerSecond)
	require.InDelta(t, r.WorkflowTasksPerSecond/r.BaselineTasksPerSecond, r.Ratio, 1e-9)
	m := asJSON(t, r)
	require.Equal(t, "workflow", m["mode"])
	require.EqualValues(t, 300, m["diamonds"])
	require.EqualValues(t, 2, m["rounds"])
	for _, k := range []string{"baseline_tasks_per_second", "workflow_tasks_per_second", "ratio", "baseline_runs", "workflow_runs"} {
		require.Contains(t, m, k)
	}

	db := e.Admin()
	require.Equal(t, 4800, scalar[int](t, db, `select count(*)::int from queues.task where status = 'completed'`))
	// Two rounds of 300 diamonds: 1,200 middle tasks after a root, 600 sinks after two middle
	// tasks of the same workflow, every child claimed after all its parents completed.
	require.Equal(t, 1200, scalar[int](t, db, `select count(*)::int from queues.task where cardinality(after_ids) = 1`))
	require.Equal(t, 600, scalar[int](t, db, `select count(*)::int from queues.task where cardinality(after_ids) = 2`))
	require.Equal(t, 600, scalar[int](t, db, `select count(distinct workflow_id)::int from queues.task`))
	require.Zero(t, scalar[int](t, db, `select count(*)::int from queues.task c
		join queues.task p on p.task_id = any (c.after_ids)
		where p.workflow_id is distinct from c.workflow_id and p.task_id <> c.workflow_id
		   or p.completed_at > c.claimed_at`))
}
