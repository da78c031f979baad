package taskorch_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

type groupArgs struct{ N int }

func (groupArgs) TaskType() string { return "dwf.group" }

// The worker writes the checkpoints of steps that finish at the same time in one statement
// (docs/workflows.md, "What a step costs"). Each workflow still gets its own answer: 24 workflows
// finish their first step together; the leases of a third of them were taken by another claim
// meanwhile, so their checkpoints are refused (ErrLeaseLost) while the others' are recorded, each
// exactly once, and every workflow's second run (under its new lease) completes from its own
// checkpoints.
func TestDurableStepCheckpointsGroupedEachAnswered(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	const n = 24

	var mu sync.Mutex
	entered := map[int64]int{} // first-run entries into step "a", by task
	firstErr := map[int64]error{}
	allIn, release := make(chan struct{}), make(chan struct{})
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, args groupArgs) error {
		id := wf.Task().ID
		a, err := taskorch.Step(wf, "a", func(context.Context) (int, error) {
			mu.Lock()
			entered[id]++
			first := entered[id] == 1
			if first && len(entered) == n {
				close(allIn)
			}
			mu.Unlock()
			if first {
				<-release
			}
			return args.N * 10, nil
		})
		mu.Lock()
		if _, seen := firstErr[id]; !seen {
			firstErr[id] = err
		}
		mu.Unlock()
		if err != nil {
			return err
		}
		b, err := taskorch.Step(wf, "b", func(context.Context) (int, error) { return a + 1, nil })
		if err != nil {
			return err
		}
		return taskorch.SetResult(ctx, b)
	}, &taskorch.HandlerOpts{Timeout: -1})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: n})

	ids := make([]int64, n)
	for i := range ids {
		res, err := c.Enqueue(ctx, groupArgs{N: i}, nil)
		require.NoError(t, err)
		ids[i] = res.TaskID
	}
	<-allIn
	// Every third workflow's lease expires and another claim takes its task, as a worker that
	// lost its lease would see; that claim's lease then expires too, so the worker runs it again.
	stolen := map[int64]bool{}
	for i := 0; i < n; i += 3 {
		stolen[ids[i]] = true
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `update queues.task set lease_expires_at = clock_timestamp() - interval '1 second' where task_id = $1`, ids[i]); err != nil {
				return err
			}
			var lease int64
			if err := tx.QueryRow(ctx, `select lease_id from queues.claim_tasks_by_id('thief', array[$1::bigint], interval '5 minutes', array['dwf.group'])`, ids[i]).Scan(&lease); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `update queues.task set lease_expires_at = clock_timestamp() - interval '1 second' where task_id = $1 and lease_id = $2`, ids[i], lease)
			return err
		}))
	}
	close(release)

	for i, id := range ids {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
		task, err := c.Get(ctx, id)
		require.NoError(t, err)
		require.JSONEq(t, strconv.Itoa(i*10+1), string(task.Result))
		mu.Lock()
		err = firstErr[id]
		mu.Unlock()
		if stolen[id] {
			require.ErrorIs(t, err, taskorch.ErrLeaseLost, "task %d's first checkpoint was written under a lost lease", id)
		} else {
			require.NoError(t, err, "task %d", id)
		}
		require.Equal(t, []string{"a", "b"}, scalar[[]string](t, pool,
			`select array_agg(name order by seq) from queues.workflow_step where task_id = $1`, id), "task %d", id)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		want := 1
		if stolen[id] {
			want = 2 // refused the first time: the step runs again
		}
		require.Equal(t, want, entered[id], "task %d: step a's runs", id)
	}
}
