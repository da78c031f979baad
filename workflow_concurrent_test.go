package taskorch_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Parents of the same children ending at once, from 8 sessions in batches that cross stripes
// and children, neither deadlock nor lose or double a count: two children of 300 shared parents
// (one 'run', one 'cancel') plus, for each parent, a child of its own; one parent fails, in the
// middle of the others' completions. The 'cancel' child is cancelled, the 'run' child is released
// once every parent ended, and each single-parent child follows its own parent.
func TestWorkflowConcurrentEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)
	const n = 300
	parents := scalar[[]int64](t, pool, `select queues.enqueue_many(array_fill('wf.cp'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, n)
	run := enqueueAfter(t, pool, "wf.sink", "run", parents...)
	cancel := enqueueAfter(t, pool, "wf.sink", "cancel", parents...)
	own := make(map[int64]int64, n)
	for _, p := range parents {
		own[p] = enqueueAfter(t, pool, "wf.own", "cancel", p)
	}
	got := claim(t, pool, "wf-conc", n, "10 minutes")
	require.Len(t, got, n)
	rand.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	failed := got[n/2].TaskID

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for s := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s * 7; i < n; i += 8 * 7 {
				var ids, leases []int64
				for _, g := range got[i:min(i+7, n)] {
					if g.TaskID == failed {
						if _, err := pool.Exec(ctx, `select queues.fail_task($1, 'no', $2, false)`, g.TaskID, g.LeaseID); err != nil {
							errs <- err
						}
						continue
					}
					ids, leases = append(ids, g.TaskID), append(leases, g.LeaseID)
				}
				if _, err := pool.Exec(ctx, `select * from queues.complete_tasks_with_results($1, $2, null)`, ids, leases); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, n-1, scalar[int](t, pool, `select count(*) from queues.task where task_type = 'wf.cp' and status = 'completed'`))
	require.Equal(t, "pending", statusOf(t, pool, run))
	require.Equal(t, "cancelled", statusOf(t, pool, cancel))
	for p, c := range own {
		want := "pending"
		if p == failed {
			want = "cancelled"
		}
		require.Equal(t, want, statusOf(t, pool, c), "the child of %d", p)
	}
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))
	// The cancelled child of many parents keeps its stripe counters until it is deleted; a child of
	// one parent has no counter but its edge, gone with its parent's end.
	require.ElementsMatch(t, []int64{cancel}, scalar[[]int64](t, pool, `select coalesce(array_agg(distinct child_id), '{}') from queues.task_wait_stripe`))
}
