package transportsuite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/dispatch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/sqstest"
	"github.com/taskorch/taskorch/transport/redisstream"
	"github.com/taskorch/taskorch/transport/sqs"
)

// Per transport: two workers that run different task types share one Redis stream or SQS queue.
// A message for a type its receiver does not run is not claimed: the task stays pending, and a
// worker that runs the type sends it again (its reclaimer, after RedispatchAfter) until that
// worker receives it. Every task is claimed once, by a worker that runs its type, and succeeds
// at its first attempt.
func TestTransportWorkersOfDifferentTypes(t *testing.T) {
	t.Parallel()
	rigs := map[string]func(t *testing.T) *transportRig{
		redisstream.Name: func(t *testing.T) *transportRig {
			rig, _ := redisRig(t, dispatch.FaultConfig{})
			return rig
		},
		sqs.Name: func(t *testing.T) *transportRig { return sqsRig(t, sqstest.Faults{}) },
	}
	for name, mkRig := range rigs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rig := mkRig(t)
			pool := dbtest.NewDB(t)
			explainUnfinished(t, pool)
			var regs []*prometheus.Registry
			for _, typ := range []string{"alpha", "beta"} {
				hs := taskorch.NewHandlers()
				hs.HandleFunc(typ, func(context.Context, *taskorch.Task) error { return nil })
				reg, _ := transportWorker(t, pool, rig, name+"-"+typ, taskorch.WorkerConfig{
					Handlers: hs, Concurrency: 4, RedispatchAfter: 100 * time.Millisecond,
				})
				regs = append(regs, reg)
			}
			const each = 100
			mustExec(t, pool, `select queues.enqueue_many(array_fill('alpha'::text, array[$1::int]) || array_fill('beta'::text, array[$1::int]),
				array_fill('{}'::jsonb, array[2 * $1::int]))`, each)
			waitProgress(t, 30*time.Second, 2*each, "every task completed", func() int64 {
				return scalar[int64](t, pool, `select count(*) from queues.task where status = 'completed'`)
			})
			require.Equal(t, map[string]int64{
				fmt.Sprintf("alpha by %s-alpha, attempt 1", name): each,
				fmt.Sprintf("beta by %s-beta, attempt 1", name):   each,
			}, claimsBy(t, pool), "each task claimed once, by the worker that runs its type")
			t.Logf("%s: %.0f messages received, %.0f refused at the claim (another type's, or sent again meanwhile), %d tasks sent again by a reclaimer",
				name, metricSum(t, "taskorch_transport_messages_received_total", regs...),
				metricSum(t, "taskorch_transport_duplicates_refused_total", regs...),
				scalar[int64](t, pool, `select count(*) from queues.task_event where event = 'redispatched'`))
		})
	}
}

// claimsBy counts the leases of every task by "type by worker, attempt n".
func claimsBy(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(t.Context(), `select format('%s by %s, attempt %s', t.task_type, l.worker_id, t.attempt), count(*)
		from queues.task_lease l join queues.task t using (task_id) group by 1`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		require.NoError(t, rows.Scan(&k, &n))
		out[k] = n
	}
	require.NoError(t, rows.Err())
	return out
}
