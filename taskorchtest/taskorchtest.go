// Package taskorchtest helps the tests of programs that use taskorch, from any module: a migrated
// database of the test's own (NewDB, NewDBURL: cloned from a template migrated once), a
// transaction rolled back when the test ends (Tx), one task run through its handler without a
// worker (Work, in memory; WorkTask, claimed and recorded in the database or the test's
// transaction), a context under which a handler's SetResult works outside a worker
// (HandlerContext); and, for tests with a worker, run one for the length of a test (StartWorker),
// wait for a task's outcome, and check what a piece of code enqueued. docs/testing.md has a
// complete example; examples/orders is a service tested with it.
//
//	func TestSignup(t *testing.T) {
//		ctx := t.Context()
//		hs := taskorch.NewHandlers()
//		taskorch.AddHandler(hs, sendWelcome)
//		taskorchtest.StartWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
//
//		res, err := client.Enqueue(ctx, SendWelcome{AccountID: 7}, nil)
//		require.NoError(t, err)
//		task := taskorchtest.WaitForOutcome(ctx, t, client, res.TaskID)
//		require.Equal(t, taskorch.StatusCompleted, task.Status)
//	}
//
// A helper that waits polls the database (nothing sleeps longer than a polling interval); every
// helper fails the test with a message that says what it found.
package taskorchtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
)

// Test defaults StartWorker gives a WorkerConfig's unset fields.
const (
	// PollInterval and MaxPollInterval bound a test worker's idle polling, so that it picks up
	// a retry or a task scheduled a moment ahead within a tenth of a second (a new task wakes it
	// at once either way).
	PollInterval = 10 * time.Millisecond
	// MaxPollInterval: see PollInterval.
	MaxPollInterval = 100 * time.Millisecond
	// ShutdownGrace is how long a test's worker lets running tasks finish when the test ends.
	ShutdownGrace = time.Second
)

// StartWorker makes a worker over pool with cfg (nil for the defaults) and runs it until the
// test ends; the test's cleanup stops it (see Worker.Run) and waits for it. The test fails if
// the worker cannot be made, or if Run returns an error.
//
// Fields of cfg left zero get test defaults where the worker's would slow a test down:
// PollInterval, MaxPollInterval and ShutdownGrace (the constants of this package), and a Logger
// that writes at Info level to the test's log (shown when the test fails, or with -v). cfg itself
// is not modified.
//
// Register the cleanups that must run after the worker has stopped (closing pool, dropping the
// test's database) before calling StartWorker: cleanups run last registered, first.
func StartWorker(tb testing.TB, pool *pgxpool.Pool, cfg *taskorch.WorkerConfig) *taskorch.Worker {
	tb.Helper()
	c := taskorch.WorkerConfig{}
	if cfg != nil {
		c = *cfg
	}
	if c.PollInterval == 0 && c.MaxPollInterval == 0 {
		c.PollInterval, c.MaxPollInterval = PollInterval, MaxPollInterval
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = ShutdownGrace
	}
	if c.LeaderTTL == 0 {
		c.LeaderTTL = 2 * time.Second // a schedule's test gets a leader (or a new one) within it, not 15 s
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	w, err := taskorch.NewWorker(pool, &c)
	if err != nil {
		tb.Fatalf("taskorchtest: make the worker: %v", err)
		return nil
	}
	ctx, cancel := context.WithCancel(tb.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			tb.Errorf("taskorchtest: worker %s: Run returned an error: %v", w.ID(), err)
		}
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	return w
}

// tbWriter writes a worker's log lines to the test's log.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// WaitTimeout bounds WaitForOutcome when ctx has no earlier deadline.
const WaitTimeout = 30 * time.Second

// waitPoll is how often WaitForOutcome reads the task.
const waitPoll = 10 * time.Millisecond

// WaitForOutcome waits until the task has an outcome (its status is completed, failed, dead or
// cancelled: Status.Finished) and returns it as it is then. It reads the task through client
// every few milliseconds, and fails the test, naming the task's last status and error, when
// WaitTimeout passes or ctx is done first. A task that does not exist yet (its enqueue has not
// committed) is waited for like any other.
//
// A task whose attempt fails is pending again until its retry: WaitForOutcome waits through the
// retries, to the end. Wait with your own condition (the status on the database) to see one
// attempt.
func WaitForOutcome(ctx context.Context, tb testing.TB, client *taskorch.Client, taskID int64) *taskorch.Task {
	tb.Helper()
	t, err := waitForOutcome(ctx, client, taskID, WaitTimeout, waitPoll)
	if err != nil {
		tb.Fatalf("taskorchtest: %v", err)
		return nil
	}
	return t
}

func waitForOutcome(ctx context.Context, client *taskorch.Client, id int64, timeout, poll time.Duration) (*taskorch.Task, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var last *taskorch.Task
	for {
		t, err := client.Get(ctx, id)
		switch {
		case err == nil:
			if t.Status.Finished() {
				return t, nil
			}
			last = t
		case errors.Is(err, taskorch.ErrNotFound):
		case ctx.Err() != nil:
		default:
			return nil, fmt.Errorf("wait for the outcome of task %d: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("task %d has no outcome after %s: %s", id, time.Since(start).Round(time.Millisecond), describe(last))
		case <-tick.C:
		}
	}
}

// describe says where a task stands, for a failure message.
func describe(t *taskorch.Task) string {
	if t == nil {
		return "it does not exist (was its enqueue committed?)"
	}
	s := fmt.Sprintf("it is %s at attempt %d of %d", t.Status, t.Attempt, t.MaxAttempts)
	if t.LastError != nil {
		s += fmt.Sprintf("; its last error: %.300s", *t.LastError)
	}
	return s
}

// RequireEnqueuedOpts are what RequireEnqueued checks besides the task's type. Each zero field
// (nil, "", 0, the zero time) is not checked.
type RequireEnqueuedOpts struct {
	// Priority is the task's priority.
	Priority *int
	// MaxAttempts is the task's max attempts.
	MaxAttempts int
	// IdempotencyKey is the task's idempotency key.
	IdempotencyKey string
	// ScheduledAt is when the task was scheduled, compared to the microsecond (PostgreSQL's
	// precision).
	ScheduledAt time.Time
	// Status is the task's status.
	Status taskorch.Status
}

// RequireEnqueued checks that exactly one task of T's type exists in db, decodes its payload
// into a T and returns it, and checks it against opts (nil: the type alone). It fails the test
// when there is no such task, more than one (the one to return would be ambiguous), a payload
// that does not decode, or a field that differs from opts.
//
// db may be the test's transaction, in which case it sees the tasks the code under test
// enqueued in it with EnqueueTx, before (and without) a commit:
//
//	task := taskorchtest.RequireEnqueued[SendWelcome](ctx, t, tx, &taskorchtest.RequireEnqueuedOpts{MaxAttempts: 3})
//	require.Equal(t, int64(7), task.Args.AccountID)
func RequireEnqueued[T taskorch.TaskArgs](ctx context.Context, tb testing.TB, db taskorch.DBTX, opts *RequireEnqueuedOpts) *taskorch.TaskFor[T] {
	tb.Helper()
	t, err := requireEnqueued[T](ctx, db, opts)
	if err != nil {
		tb.Fatalf("taskorchtest: %v", err)
		return nil
	}
	return t
}

// RequireNotEnqueued checks that no task of T's type exists in db, and fails the test
// otherwise.
func RequireNotEnqueued[T taskorch.TaskArgs](ctx context.Context, tb testing.TB, db taskorch.DBTX) {
	tb.Helper()
	if err := requireNotEnqueued[T](ctx, db); err != nil {
		tb.Fatalf("taskorchtest: %v", err)
	}
}

func requireEnqueued[T taskorch.TaskArgs](ctx context.Context, db taskorch.DBTX, opts *RequireEnqueuedOpts) (*taskorch.TaskFor[T], error) {
	var zero T
	typ := zero.TaskType()
	tasks, err := tasksOfType(ctx, db, typ, 2)
	if err != nil {
		return nil, err
	}
	switch len(tasks) {
	case 0:
		return nil, fmt.Errorf("no task of type %q was enqueued", typ)
	case 1:
	default:
		return nil, fmt.Errorf("more than one task of type %q was enqueued (tasks %d and %d, at least): "+
			"RequireEnqueued checks a single task", typ, tasks[0].ID, tasks[1].ID)
	}
	t := tasks[0]
	var args T
	if err := json.Unmarshal(t.Payload, &args); err != nil {
		return nil, fmt.Errorf("task %d of type %q: its payload %.200s does not decode into %T: %w", t.ID, typ, t.Payload, args, err)
	}
	if opts != nil {
		if err := compare(t, opts); err != nil {
			return nil, fmt.Errorf("task %d of type %q: %w", t.ID, typ, err)
		}
	}
	return &taskorch.TaskFor[T]{Task: t, Args: args}, nil
}

func requireNotEnqueued[T taskorch.TaskArgs](ctx context.Context, db taskorch.DBTX) error {
	var zero T
	typ := zero.TaskType()
	tasks, err := tasksOfType(ctx, db, typ, 1)
	if err != nil {
		return err
	}
	if len(tasks) > 0 {
		return fmt.Errorf("a task of type %q was enqueued (task %d, %s); want none", typ, tasks[0].ID, tasks[0].Status)
	}
	return nil
}

// compare returns an error naming the first field of t that differs from opts.
func compare(t *taskorch.Task, opts *RequireEnqueuedOpts) error {
	key := ""
	if t.IdempotencyKey != nil {
		key = *t.IdempotencyKey
	}
	switch {
	case opts.Priority != nil && t.Priority != *opts.Priority:
		return fmt.Errorf("priority is %d, want %d", t.Priority, *opts.Priority)
	case opts.MaxAttempts != 0 && t.MaxAttempts != opts.MaxAttempts:
		return fmt.Errorf("max attempts is %d, want %d", t.MaxAttempts, opts.MaxAttempts)
	case opts.IdempotencyKey != "" && key != opts.IdempotencyKey:
		return fmt.Errorf("idempotency key is %q, want %q", key, opts.IdempotencyKey)
	case !opts.ScheduledAt.IsZero() && !t.ScheduledAt.Truncate(time.Microsecond).Equal(opts.ScheduledAt.Truncate(time.Microsecond)):
		return fmt.Errorf("scheduled at %s, want %s", t.ScheduledAt.UTC().Format(time.RFC3339Nano),
			opts.ScheduledAt.UTC().Format(time.RFC3339Nano))
	case opts.Status != "" && t.Status != opts.Status:
		return fmt.Errorf("status is %s, want %s", t.Status, opts.Status)
	}
	return nil
}

// tasksOfType reads up to limit tasks of type typ, oldest first, from queues.task.
func tasksOfType(ctx context.Context, db taskorch.DBTX, typ string, limit int) ([]*taskorch.Task, error) {
	rows, err := db.Query(ctx, `select task_id, task_type, payload, priority, idempotency_key, scheduled_at, enqueued_at,
		max_attempts, status::text, run_at, attempt, lease_id, lease_expires_at, worker_id, last_error,
		claimed_at, completed_at, failed_at, dead_at, cancelled_at
		from queues.task where task_type = $1 order by task_id limit $2`, typ, limit)
	if err != nil {
		return nil, fmt.Errorf("read the tasks of type %q: %w", typ, err)
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*taskorch.Task, error) {
		var t taskorch.Task
		var payload []byte
		err := r.Scan(&t.ID, &t.Type, &payload, &t.Priority, &t.IdempotencyKey, &t.ScheduledAt, &t.EnqueuedAt,
			&t.MaxAttempts, &t.Status, &t.RunAt, &t.Attempt, &t.LeaseID, &t.LeaseExpiresAt, &t.WorkerID, &t.LastError,
			&t.ClaimedAt, &t.CompletedAt, &t.FailedAt, &t.DeadAt, &t.CancelledAt)
		t.Payload = payload
		return &t, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the tasks of type %q: %w", typ, err)
	}
	return tasks, nil
}
