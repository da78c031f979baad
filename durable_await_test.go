package taskorch_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

type fanArgs struct{ N int }

func (fanArgs) TaskType() string { return "dwf.fan" }

type leafArgs struct{ I int }

func (leafArgs) TaskType() string { return "dwf.leaf" }

// A workflow spawns 100 tasks and awaits them: while they run it waits without a slot or an
// attempt (status waiting); the end of the last one makes it due, and the run after it gets every
// task with its status and result, one that failed among them; the spawns are not repeated.
func TestDurableWorkflowAwait100(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	const n = 100
	var runs atomic.Int32
	release := make(chan struct{})
	type outcome struct {
		sum, count int
		statuses   map[taskorch.Status]int
	}
	done := make(chan outcome, 1)
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, a fanArgs) error {
		runs.Add(1)
		ids := make([]int64, a.N)
		for i := range ids {
			id, err := taskorch.Spawn(wf, "leaf", leafArgs{I: i}, nil)
			if err != nil {
				return err
			}
			ids[i] = id
		}
		tasks, err := wf.Await("leaves", ids...)
		if err != nil {
			return err
		}
		o := outcome{count: len(tasks), statuses: map[taskorch.Status]int{}}
		for _, t := range tasks {
			o.statuses[t.Status]++
			var v int
			if t.Status == taskorch.StatusCompleted {
				if err := json.Unmarshal(t.Result, &v); err != nil {
					return err
				}
				o.sum += v
			}
		}
		done <- o
		return nil
	})
	taskorch.AddHandler(hs, func(ctx context.Context, t *taskorch.TaskFor[leafArgs]) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		if t.Args.I == 50 {
			return taskorch.Discard(errors.New("leaf 50 cannot"))
		}
		return taskorch.SetResult(ctx, t.Args.I)
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 20})

	res, err := c.Enqueue(ctx, fanArgs{N: n}, nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusWaiting)
	require.Equal(t, 0, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, res.TaskID), "waiting spends no attempt")
	close(release)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)

	o := <-done
	require.Equal(t, n, o.count)
	require.Equal(t, map[taskorch.Status]int{taskorch.StatusCompleted: n - 1, taskorch.StatusFailed: 1}, o.statuses)
	require.Equal(t, n*(n-1)/2-50, o.sum)
	require.Equal(t, int32(2), runs.Load())
	require.Equal(t, n, scalar[int](t, pool, `select count(*) from queues.task where task_type = 'dwf.leaf'`), "spawned once")
	require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, res.TaskID))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))
	require.Equal(t, "await:leaves", scalar[string](t, pool,
		`select kind || ':' || name from queues.workflow_step where task_id = $1 order by seq desc limit 1`, res.TaskID))
}

type awaitEndedArgs struct{ IDs []int64 }

func (awaitEndedArgs) TaskType() string { return "dwf.await_ended" }

// Awaiting tasks that have all ended returns at once, without suspending; bad input is
// ErrInvalidInput and suspends nothing.
func TestDurableWorkflowAwaitEndedAndBadInput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	a := scalar[int64](t, pool, `select queues.enqueue('dwf.x', '{}')`)
	b := scalar[int64](t, pool, `select queues.enqueue('dwf.x', '{}')`)
	mustExec(t, pool, `select queues.cancel_task($1)`, a)
	require.Equal(t, map[int64]string{b: "completed"}, completeUnder(t, pool, []int64{b}, []int64{claimOne(t, pool, "dwf.x", b)}))

	type got struct {
		tasks []*taskorch.Task
		bad   [3]error
	}
	out := make(chan got, 1)
	var runs atomic.Int32
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, args awaitEndedArgs) error {
		runs.Add(1)
		var g got
		_, g.bad[0] = wf.Await("none")
		_, g.bad[1] = wf.Await("missing", 987654321)
		_, g.bad[2] = wf.Await("itself", wf.Task().ID)
		tasks, err := wf.Await("ended", args.IDs...)
		g.tasks = tasks
		out <- g
		return err
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	res, err := c.Enqueue(ctx, awaitEndedArgs{IDs: []int64{b, a, b}}, nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	g := <-out
	for _, e := range g.bad {
		require.ErrorIs(t, e, taskorch.ErrInvalidInput)
	}
	require.Len(t, g.tasks, 2)
	require.Equal(t, []int64{a, b}, []int64{g.tasks[0].ID, g.tasks[1].ID})
	require.Equal(t, []taskorch.Status{taskorch.StatusCancelled, taskorch.StatusCompleted}, []taskorch.Status{g.tasks[0].Status, g.tasks[1].Status})
	require.Equal(t, "dwf.x", g.tasks[1].Type)
	require.Equal(t, int32(1), runs.Load())

	// Under a stale lease the SQL side writes nothing.
	id := scalar[int64](t, pool, `select queues.enqueue('dwf.sql', '{}')`)
	lease := claimOne(t, pool, "dwf.sql", id)
	require.Equal(t, "lease_lost", scalar[string](t, pool, `select outcome from queues.await_workflow_tasks($1, $2, 1, 'x', array[$3::bigint])`, id, lease+1, a))
	require.Equal(t, "running", statusOf(t, pool, id))
}
