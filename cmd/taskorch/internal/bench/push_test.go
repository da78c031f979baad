package bench_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/bench"
)

// bench push runs the Go handler's tasks and then the pushed ones, every task of both completed
// at its first attempt (the endpoint counts only requests whose signature it verified, and the
// run waits for that count); it reports both rates and their ratio under the documented JSON keys.
func TestPush(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Push(t.Context(), e, bench.PushConfig{
		Tasks: 500, WorkerOptions: bench.WorkerOptions{Workers: 2, Concurrency: 20},
	})
	require.NoError(t, err)
	require.EqualValues(t, 500, r.Baseline.Tasks)
	require.EqualValues(t, 500, r.Push.Tasks)
	require.Positive(t, r.BaselineTasksPerSecond)
	require.Positive(t, r.PushTasksPerSecond)
	require.InDelta(t, r.PushTasksPerSecond/r.BaselineTasksPerSecond, r.Ratio, 1e-9)
	require.Contains(t, r.Endpoint, "http://127.0.0.1:")
	m := asJSON(t, r)
	require.Equal(t, "push", m["mode"])
	for _, k := range []string{"baseline_tasks_per_second", "push_tasks_per_second", "ratio", "endpoint"} {
		require.Contains(t, m, k)
	}
	db := e.Admin()
	require.Equal(t, 1000, scalar[int](t, db, `select count(*)::int from queues.task where status = 'completed' and attempt = 1`))
	require.Zero(t, scalar[int](t, db, `select count(*)::int from queues.error`))
}
