package taskorch_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

type confirmArgs struct {
	User    string
	Timeout time.Duration
}

func (confirmArgs) TaskType() string { return "dwf.confirm" }

type confirmation struct {
	At string `json:"at"`
}

// signalWorkflow registers a workflow that waits for ("email.confirmed", User) and records what it
// got as its result; runs counts its runs.
func signalWorkflow(t *testing.T, runs *atomic.Int32) *taskorch.Handlers {
	t.Helper()
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, a confirmArgs) error {
		runs.Add(1)
		c, received, err := taskorch.AwaitSignal[confirmation](wf, "email.confirmed", a.User, a.Timeout)
		if err != nil {
			return err
		}
		return taskorch.SetResult(ctx, map[string]any{"received": received, "at": c.At})
	})
	return hs
}

// A signal that came before the wait is found at once: the run does not suspend.
func TestDurableWorkflowSignalBeforeTheWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	var runs atomic.Int32
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: signalWorkflow(t, &runs)})
	_, err := c.Signal(ctx, "email.confirmed", "ann", map[string]string{"at": "09:00"})
	require.NoError(t, err)

	res, err := c.Enqueue(ctx, confirmArgs{User: "ann", Timeout: time.Hour}, nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.JSONEq(t, `{"received": true, "at": "09:00"}`, string(task.Result))
	require.Equal(t, int32(1), runs.Load())
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.signal_wait`))
}

// A wait with no signal yet ends the run: the task is pending until the deadline, its attempt not
// spent, registered for the signal; the signal makes it due at once, and the next run gets the
// payload. A second signal changes nothing.
func TestDurableWorkflowSignalAfterTheWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	var runs atomic.Int32
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: signalWorkflow(t, &runs)})
	res, err := c.Enqueue(ctx, confirmArgs{User: "bob", Timeout: time.Hour}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return scalar[int](t, pool, `select count(*) from queues.signal_wait where task_id = $1`, res.TaskID) == 1
	}, 20*time.Second, 5*time.Millisecond)
	waitStatus(t, pool, res.TaskID, taskorch.StatusPending)
	require.True(t, scalar[bool](t, pool, `select run_at > now() + interval '50 minutes' and attempt = 0 from queues.task where task_id = $1`, res.TaskID),
		"pending until the deadline, the attempt not spent")

	_, err = c.Signal(ctx, "email.confirmed", "bob", map[string]string{"at": "10:30"})
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.JSONEq(t, `{"received": true, "at": "10:30"}`, string(task.Result))
	require.Equal(t, int32(2), runs.Load())
	require.Equal(t, 1, task.Attempt)
	require.Equal(t, []string{"signal_wait:email.confirmed", "signal:email.confirmed"}, scalar[[]string](t, pool,
		`select array_agg(kind || ':' || name order by seq) from queues.workflow_step where task_id = $1`, res.TaskID))
}

// With no signal by the deadline, the next run records that it did not come, for good: a signal
// after it changes nothing.
func TestDurableWorkflowSignalTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	var runs atomic.Int32
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: signalWorkflow(t, &runs)})
	res, err := c.Enqueue(ctx, confirmArgs{User: "cy", Timeout: time.Second}, nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.JSONEq(t, `{"received": false, "at": ""}`, string(task.Result))
	require.True(t, scalar[bool](t, pool, `select t.completed_at >= w.wake_at from queues.task t
		join queues.workflow_step w on w.task_id = t.task_id and w.kind = 'signal_wait' where t.task_id = $1`, res.TaskID))
	_, err = c.Signal(ctx, "email.confirmed", "cy", map[string]string{"at": "late"})
	require.NoError(t, err)
	require.JSONEq(t, `{"received": false}`, scalar[string](t, pool,
		`select result::text from queues.workflow_step where task_id = $1 and kind = 'signal'`, res.TaskID))
	require.Equal(t, "completed", statusOf(t, pool, res.TaskID))
}

// A signal whose transaction holds the signal's lock while the workflow's wait asks for it: the
// wait waits for the lock, then finds the signal, and the run does not suspend. The wait and the
// signal are ordered by one lock, so neither misses the other.
func TestDurableWorkflowSignalRacingTheWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	var runs atomic.Int32
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `select internal.lock_signal('email.confirmed', 'dee')`)
	require.NoError(t, err)

	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: signalWorkflow(t, &runs)})
	res, err := c.Enqueue(ctx, confirmArgs{User: "dee", Timeout: time.Hour}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select exists (select from pg_stat_activity
			where wait_event_type = 'Lock' and wait_event = 'advisory' and query like '%await_workflow_signal%')`)
	}, 20*time.Second, 5*time.Millisecond, "the wait never asked for the signal's lock")
	_, err = c.SignalTx(ctx, tx, "email.confirmed", "dee", map[string]string{"at": "racing"})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.JSONEq(t, `{"received": true, "at": "racing"}`, string(task.Result))
	require.Equal(t, int32(1), runs.Load())
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.signal_wait`))
}

// Bad input to the wait is refused with 22023 and writes nothing; a stale lease gets lease_lost.
func TestDurableWorkflowSignalBadInput(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	id := scalar[int64](t, pool, `select queues.enqueue('dwf.sql', '{}')`)
	lease := claimOne(t, pool, "dwf.sql", id)
	for _, args := range [][2]string{{"''", "'k'"}, {"'n'", "''"}, {"'n'", fmt.Sprintf("'%0600d'", 0)}} {
		sql := fmt.Sprintf(`select * from queues.await_workflow_signal($1, $2, 1, %s, %s, now() + interval '1 hour')`, args[0], args[1])
		requireSQLState(t, probeErr(t, pool, sql, id, lease), "22023", ".", sql)
	}
	sql := `select * from queues.await_workflow_signal($1, $2, 1, 'n', 'k', 'infinity')`
	requireSQLState(t, probeErr(t, pool, sql, id, lease), "22023", "finite", sql)
	require.Equal(t, "lease_lost", scalar[string](t, pool, `select outcome from queues.await_workflow_signal($1, $2, 1, 'n', 'k', now() + interval '1 hour')`, id, lease+1))
	require.Equal(t, "running", statusOf(t, pool, id))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.signal_wait`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.workflow_step`))
}
