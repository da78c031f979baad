package bench_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/bench"
)

// bench sleepers runs its load without and then with the sleepers, each workflow asleep after
// its one step (a pending task due in 30 days, its step and its sleep recorded), and reports
// each phase's claims and idle memory, and the ratios, under the documented JSON keys.
func TestSleepers(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Sleepers(t.Context(), e, bench.SleepersConfig{
		Sleepers: 300, Rate: 200, Phase: time.Second, Idle: time.Second, WorkerOptions: bench.WorkerOptions{Concurrency: 20},
	})
	require.NoError(t, err)
	require.Len(t, r.Phases, 2)
	without, with := r.Phases[0], r.Phases[1]
	require.Zero(t, without.Sleeping)
	require.EqualValues(t, 300, with.Sleeping)
	for _, p := range r.Phases {
		require.Positive(t, p.IdleRSSMB, p.Name)
		require.LessOrEqual(t, p.Claim.P50, p.Claim.P99, p.Name)
	}
	m := asJSON(t, r)
	require.Equal(t, "sleepers", m["mode"])
	for _, k := range []string{"sleepers", "rate", "phase_seconds", "put_to_sleep_seconds", "phases", "rss_ratio", "claim_p99_ratio"} {
		require.Contains(t, m, k)
	}

	db := e.Admin()
	require.Equal(t, 300, scalar[int](t, db, `select count(*)::int from queues.task where task_type = 'bench.sleeper'
		and status = 'pending' and run_at > now() + interval '29 days'`))
	require.Zero(t, scalar[int](t, db, `select count(*)::int from (select task_id from queues.workflow_step group by task_id
		having array_agg(kind || ':' || name order by seq) <> array['step:before', 'sleep:nap']) x`))
	require.Equal(t, 300, scalar[int](t, db, `select count(distinct task_id)::int from queues.workflow_step`))
	require.Zero(t, scalar[int](t, db, `select count(*)::int from queues.task where task_type = 'taskorch.noop' and status <> 'completed'`))
}
