package taskorch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A child of 1,000 parents, all enqueued in one transaction, waits while any parent runs and is
// released exactly once, by the completion of its last parent and inside that completion's
// transaction: before that transaction commits, another session still sees it waiting. Its
// counters are 32 stripes of about 31 parents, so no row is updated by every parent's
// completion.
func TestWorkflowFanIn1000(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	const n = 1000
	parents := make([]int64, n)
	var child int64
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i := range parents {
			r, err := c.EnqueueTx(ctx, tx, raw("wf.parent", `{}`), nil)
			require.NoError(t, err)
			parents[i] = r.TaskID
		}
		r, err := c.EnqueueTx(ctx, tx, raw("wf.child", `{}`), &taskorch.EnqueueOpts{After: parents})
		require.NoError(t, err)
		child = r.TaskID
		return nil
	}))
	require.Equal(t, "waiting", statusOf(t, pool, child))
	require.Equal(t, 32, scalar[int](t, pool, `select count(*) from queues.task_wait_stripe where child_id = $1`, child))
	require.Equal(t, 32, scalar[int](t, pool, `select waiting_stripes from queues.task where task_id = $1`, child))
	require.Equal(t, n, scalar[int](t, pool, `select sum(pending)::int from queues.task_wait_stripe where child_id = $1`, child))
	require.LessOrEqual(t, scalar[int](t, pool, `select max(pending) from queues.task_wait_stripe where child_id = $1`, child), 32)

	// Claim every parent, then complete all but the last in batches of 37 (crossing stripes).
	var ids, leases []int64
	for len(ids) < n {
		got := claim(t, pool, "wf-fan-in", 200, "10 minutes")
		require.NotEmpty(t, got)
		for _, g := range got {
			require.Equal(t, "wf.parent", g.Type, "the waiting child was claimed")
			ids, leases = append(ids, g.TaskID), append(leases, g.LeaseID)
		}
	}
	last := len(ids) - 1
	for i := 0; i < last; i += 37 {
		j := min(i+37, last)
		out := completeUnder(t, pool, ids[i:j], leases[i:j])
		require.Len(t, out, j-i)
		require.Equal(t, "waiting", statusOf(t, pool, child))
	}
	require.Empty(t, claim(t, pool, "wf-fan-in", 10, "10 minutes"))

	// The last completion releases it in its own transaction.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	began := time.Now()
	require.Equal(t, map[int64]string{ids[last]: "completed"}, completeUnder(t, tx, ids[last:], leases[last:]))
	took := time.Since(began)
	require.Equal(t, "pending", statusOf(t, tx, child))
	require.Equal(t, "waiting", statusOf(t, pool, child), "released before the completion committed")
	require.NoError(t, tx.Commit(ctx))
	t.Logf("the last parent's completion statement, release included, took %s", took)
	require.Equal(t, "pending", statusOf(t, pool, child))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_wait_stripe`))
	got := claim(t, pool, "wf-fan-in", 10, "10 minutes")
	require.Len(t, got, 1)
	require.Equal(t, child, got[0].TaskID)
	require.Equal(t, 1, got[0].Attempt)
}
