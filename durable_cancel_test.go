package taskorch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

type cancelSpawnerArgs struct{}

func (cancelSpawnerArgs) TaskType() string { return "dwf.spawner" }

type spawnedRunArgs struct{}

func (spawnedRunArgs) TaskType() string { return "dwf.spawned_run" }

type spawnedLaterArgs struct{}

func (spawnedLaterArgs) TaskType() string { return "dwf.spawned_later" }

// Cancelling a durable workflow reaches the tasks it spawned: the running one's context is
// cancelled (ErrTaskCancelled) and the one not due yet is cancelled too, each with an event
// naming the workflow; the workflow itself stays cancelled, and a second Cancel is a no-op.
func TestDurableWorkflowCancelReachesSpawnedTasks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	running := make(chan struct{})
	stopped := make(chan error, 1)
	var ids sync.Map
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, _ cancelSpawnerArgs) error {
		a, err := taskorch.Spawn(wf, "runs", spawnedRunArgs{}, nil)
		if err != nil {
			return err
		}
		b, err := taskorch.Spawn(wf, "later", spawnedLaterArgs{}, &taskorch.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)})
		if err != nil {
			return err
		}
		ids.Store("runs", a)
		ids.Store("later", b)
		_, err = wf.Await("both", a, b)
		return err
	})
	taskorch.AddHandler(hs, func(ctx context.Context, _ *taskorch.TaskFor[spawnedRunArgs]) error {
		close(running)
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return ctx.Err()
	}, &taskorch.HandlerOpts{Timeout: -1})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	res, err := c.Enqueue(ctx, cancelSpawnerArgs{}, nil)
	require.NoError(t, err)
	<-running
	waitStatus(t, pool, res.TaskID, taskorch.StatusWaiting)

	_, err = c.Cancel(ctx, res.TaskID)
	require.NoError(t, err)
	select {
	case cause := <-stopped:
		require.ErrorIs(t, cause, taskorch.ErrTaskCancelled, "the spawned task's handler is told")
	case <-time.After(20 * time.Second):
		t.Fatal("the running spawned task's context was not cancelled")
	}
	a, _ := ids.Load("runs")
	b, _ := ids.Load("later")
	for _, id := range []int64{a.(int64), b.(int64)} {
		require.Equal(t, "cancelled", statusOf(t, pool, id))
		require.Equal(t, fmt.Sprintf("spawned by workflow task %d, cancelled", res.TaskID), cancelReason(t, pool, id))
	}
	require.Equal(t, "cancelled", statusOf(t, pool, res.TaskID))

	_, err = c.Cancel(ctx, res.TaskID)
	require.NoError(t, err, "cancelling it again is a no-op")
}

// A workflow's cancel and its spawned tasks' completions, raced many times: the cancel (the
// workflow's row, then, after the commit, the spawned rows with SKIP LOCKED) and a completion
// that releases the awaiting workflow (the spawned row, then the workflow's) never deadlock and
// never fail; at the end the workflow is cancelled, once, and each spawned
// task is completed or cancelled, none left waiting, pending or running. (Cancelling the spawned
// rows in the cancel's own transaction, waiting for their locks, deadlocks here with 40P01 in
// the first round: tried by hand.)
func TestDurableWorkflowCancelRacesCompletions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	const rounds, children = 30, 6
	for round := range rounds {
		wf := scalar[int64](t, pool, `select queues.enqueue('dwf.race', '{}')`)
		lease := claimOne(t, pool, "dwf.race", wf)
		kids := make([]int64, children)
		for i := range kids {
			kids[i] = scalar[int64](t, pool, `select spawned_task_id from queues.spawn_workflow_task($1, $2, $3, $4, 'dwf.race_child', '{}')`,
				wf, lease, i+1, fmt.Sprintf("child-%d", i))
		}
		require.Equal(t, "waiting", scalar[string](t, pool,
			`select outcome from queues.await_workflow_tasks($1, $2, $3, 'all', $4)`, wf, lease, children+1, kids))
		kidLeases := make([]int64, children)
		for i, k := range kids {
			kidLeases[i] = claimOne(t, pool, "dwf.race_child", k)
		}

		var wg sync.WaitGroup
		errs := make(chan error, children+1)
		start := make(chan struct{})
		for i := range kids {
			wg.Go(func() {
				<-start
				// The worker's completion statement; refused (no row) once the child is cancelled.
				_, err := pool.Exec(ctx, `select * from queues.complete_tasks_with_results($1, $2, null)`,
					[]int64{kids[i]}, []int64{kidLeases[i]})
				errs <- err
			})
		}
		wg.Go(func() {
			<-start
			for {
				_, err := c.Cancel(ctx, wf)
				if err == nil || !isBusy(err) {
					errs <- err
					return
				}
			}
		})
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				require.NotEqual(t, "40P01", pgErr.Code, "round %d: deadlock", round)
			}
			require.NoError(t, err, "round %d", round)
		}

		require.Equal(t, "cancelled", statusOf(t, pool, wf), "round %d", round)
		require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task_event
			where task_id = $1 and event = 'cancelled'`, wf), "round %d: cancelled once", round)
		rows, err := pool.Query(ctx, `select status::text from queues.task where task_id = any ($1)`, kids)
		require.NoError(t, err)
		statuses, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Len(t, statuses, children)
		for _, s := range statuses {
			require.Contains(t, []string{"completed", "cancelled"}, s, "round %d: every spawned task ended", round)
		}
	}
}

// isBusy reports whether Cancel left spawned tasks whose rows were busy (call again).
func isBusy(err error) bool {
	return err != nil && !errors.Is(err, taskorch.ErrWrongState) && containsAll(err.Error(), "were busy", "call Cancel again")
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
