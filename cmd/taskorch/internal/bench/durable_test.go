package bench_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/bench"
)

// bench workflows runs as many independent tasks as the workflows have steps, then the
// workflows, every workflow completed with each of its steps checkpointed once; it reports the
// rates and the ratio under the documented JSON keys.
func TestDurable(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Durable(t.Context(), e, bench.DurableConfig{
		Workflows: 200, Steps: 3, WorkerOptions: bench.WorkerOptions{Workers: 2, Concurrency: 20},
	})
	require.NoError(t, err)
	require.EqualValues(t, 600, r.Baseline.Tasks)
	require.EqualValues(t, 200, r.Durable.Tasks)
	require.Positive(t, r.BaselineTasksPerSecond)
	require.InDelta(t, 3*r.WorkflowsPerSecond, r.StepsPerSecond, 1e-6)
	require.InDelta(t, r.StepsPerSecond/r.BaselineTasksPerSecond, r.Ratio, 1e-9)
	m := asJSON(t, r)
	require.Equal(t, "workflows", m["mode"])
	for _, k := range []string{"workflows", "steps_per_workflow", "baseline_tasks_per_second", "workflows_per_second", "steps_per_second", "ratio"} {
		require.Contains(t, m, k)
	}

	db := e.Admin()
	require.Equal(t, 200, scalar[int](t, db, `select count(*)::int from queues.task where task_type = 'bench.durable' and status = 'completed'`))
	require.Equal(t, 600, scalar[int](t, db, `select count(*)::int from queues.workflow_step`))
	require.Zero(t, scalar[int](t, db, `select count(*)::int from (select task_id from queues.workflow_step group by task_id
		having array_agg(name order by seq) <> array['step-1', 'step-2', 'step-3']) x`))
}
