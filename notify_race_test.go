package taskorch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// No wake-up is lost under concurrency (docs/worker.md, "The loop"): applications commit
// transactions that enqueue one task each, at random moments and with idle gaps between them,
// so that the workers go idle, announce that they wait and are woken over and over, with
// enqueues in flight at every point of that. Every committed task is started within the
// documented bound of its commit: when every enqueue commits, PollInterval or, when longer, what
// is left of the transaction of the enqueue that answered the announcement (it notifies at its
// commit); the backed-off poll, MaxPollInterval, when some roll back (the rolled-back enqueue
// may be the one that answered). The longest poll (a minute in the first case) is far beyond
// the bound. Rolled-back tasks never run.
func TestNoWakeUpLostUnderConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		rollbackEvery  int // 0: every transaction commits
		poll, maxPoll  time.Duration
		bound          time.Duration // the documented bound, start − commit
		apps, perApp   int
		maxGap, maxTxn time.Duration
	}{
		// Sparse traffic with long transactions: the workers back off between them (a lost
		// wake-up would wait for a poll seconds away), and enqueues are in flight while they go
		// idle. The bound is the answering enqueue's transaction, longer than PollInterval here.
		{name: "commits", poll: 100 * time.Millisecond, maxPoll: time.Minute, bound: time.Second,
			apps: 4, perApp: 10, maxGap: 2 * time.Second, maxTxn: time.Second},
		// Busier, shorter transactions, a quarter rolled back.
		{name: "rollbacks", rollbackEvery: 4, poll: 100 * time.Millisecond, maxPoll: 2 * time.Second, bound: 2 * time.Second,
			apps: 8, perApp: 25, maxGap: 300 * time.Millisecond, maxTxn: 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			pool := dbtest.NewDB(t)
			c, err := taskorch.NewClient(pool, nil)
			require.NoError(t, err)

			var mu sync.Mutex
			started := map[int64]time.Time{}
			runs := map[int64]int{}
			hs := taskorch.NewHandlers()
			hs.HandleFunc("probe", func(_ context.Context, task *taskorch.Task) error {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := started[task.ID]; !ok {
					started[task.ID] = time.Now()
				}
				runs[task.ID]++
				return nil
			})
			// Three workers with room to spare: a task never waits for a slot.
			for range 3 {
				startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 20,
					PollInterval: tc.poll, MaxPollInterval: tc.maxPoll})
			}

			type enq struct {
				id        int64
				committed time.Time
			}
			var (
				cmu        sync.Mutex
				committed  []enq
				rolledBack []int64
			)
			var wg sync.WaitGroup
			errs := make(chan error, tc.apps)
			for a := range tc.apps {
				wg.Go(func() {
					for i := range tc.perApp {
						time.Sleep(rand.N(tc.maxGap)) //nolint:forbidigo // the application's idle gap: the scenario, not a wait for a condition
						tx, err := pool.Begin(ctx)
						if err != nil {
							errs <- err
							return
						}
						res, err := c.EnqueueTx(ctx, tx, raw("probe", fmt.Sprintf(`{"app": %d, "i": %d}`, a, i)), nil)
						if err != nil {
							_ = tx.Rollback(ctx)
							errs <- err
							return
						}
						time.Sleep(rand.N(tc.maxTxn)) //nolint:forbidigo // the application's other work in its transaction
						if tc.rollbackEvery > 0 && rand.N(tc.rollbackEvery) == 0 {
							if err := tx.Rollback(ctx); err != nil {
								errs <- err
								return
							}
							cmu.Lock()
							rolledBack = append(rolledBack, res.TaskID)
							cmu.Unlock()
							continue
						}
						if err := tx.Commit(ctx); err != nil {
							errs <- err
							return
						}
						at := time.Now()
						cmu.Lock()
						committed = append(committed, enq{res.TaskID, at})
						cmu.Unlock()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.NotEmpty(t, committed)

			// Every committed task starts (none is lost) ...
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(started) >= len(committed)
			}, 2*time.Minute, 10*time.Millisecond, "not every committed task started")
			// ... within the bound of its commit, plus what claims take on a loaded machine.
			const slack = 2 * time.Second
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, started, len(committed), "a task started that was not committed")
			var worst time.Duration
			for _, e := range committed {
				at, ok := started[e.id]
				require.True(t, ok, "task %d was committed and never started", e.id)
				worst = max(worst, at.Sub(e.committed))
				require.LessOrEqual(t, at.Sub(e.committed), tc.bound+slack,
					"task %d started %s after its commit; the bound is %s", e.id, at.Sub(e.committed), tc.bound)
				require.Equal(t, 1, runs[e.id], "task %d", e.id)
			}
			for _, id := range rolledBack {
				_, ok := started[id]
				require.False(t, ok, "rolled-back task %d ran", id)
			}
			t.Logf("%d tasks committed, %d rolled back; the slowest started %s after its commit", len(committed), len(rolledBack), worst)
		})
	}
}
