package taskorchtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/taskorchtest"
)

type greet struct {
	Name string `json:"name"`
}

func (greet) TaskType() string { return "greet" }

type refuse struct{}

func (refuse) TaskType() string { return "refuse" }

// StartWorker runs a worker for the test; WaitForOutcome waits for each task's outcome.
func TestStartWorkerAndWaitForOutcome(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)

	greeted := make(chan string, 1)
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(_ context.Context, task *taskorch.TaskFor[greet]) error {
		greeted <- task.Args.Name
		return nil
	})
	taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[refuse]) error {
		return taskorch.Discard(errors.New("refused"))
	})
	cfg := &taskorch.WorkerConfig{Handlers: hs}
	w := taskorchtest.StartWorker(t, pool, cfg)
	require.NotEmpty(t, w.ID())
	require.Nil(t, cfg.Logger, "the caller's config is not modified")

	ok, err := client.Enqueue(ctx, greet{Name: "Ada"}, nil)
	require.NoError(t, err)
	bad, err := client.Enqueue(ctx, refuse{}, nil)
	require.NoError(t, err)

	task := taskorchtest.WaitForOutcome(ctx, t, client, ok.TaskID)
	require.Equal(t, taskorch.StatusCompleted, task.Status)
	require.Equal(t, "Ada", <-greeted)
	task = taskorchtest.WaitForOutcome(ctx, t, client, bad.TaskID)
	require.Equal(t, taskorch.StatusFailed, task.Status)
	require.Equal(t, "refused", *task.LastError)
}

// A task that gets no outcome fails the test with where it stands; so does a task that does not
// exist, and a worker that cannot be made.
func TestHelpersFailTheTest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	res, err := client.Enqueue(ctx, greet{Name: "nobody runs this"}, nil)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	msg := fails(t, func(tb testing.TB) { taskorchtest.WaitForOutcome(short, tb, client, res.TaskID) })
	require.Contains(t, msg, fmt.Sprintf("taskorchtest: task %d has no outcome after", res.TaskID))
	require.Contains(t, msg, "it is pending at attempt 0 of 25")

	short, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	msg = fails(t, func(tb testing.TB) { taskorchtest.WaitForOutcome(short, tb, client, 987654) })
	require.Contains(t, msg, "it does not exist")

	msg = fails(t, func(tb testing.TB) {
		taskorchtest.StartWorker(tb, pool, &taskorch.WorkerConfig{Concurrency: -1})
	})
	require.Contains(t, msg, "taskorchtest: make the worker: taskorch: worker concurrency must be between 1 and 10000, got -1")
}

// RequireEnqueued sees the tasks of the test's transaction; RequireNotEnqueued, that none is
// there. Each fails the test with what it found.
func TestRequireEnqueued(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	at := time.Now().Add(time.Hour)
	_, err = client.EnqueueTx(ctx, tx, greet{Name: "Ada"}, &taskorch.EnqueueOpts{
		Priority: new(0), MaxAttempts: 3, IdempotencyKey: "ada", ScheduledAt: at})
	require.NoError(t, err)

	task := taskorchtest.RequireEnqueued[greet](ctx, t, tx, &taskorchtest.RequireEnqueuedOpts{
		Priority: new(0), MaxAttempts: 3, IdempotencyKey: "ada", ScheduledAt: at, Status: taskorch.StatusPending})
	require.Equal(t, "Ada", task.Args.Name)
	require.Equal(t, "greet", task.Type)
	require.NotNil(t, taskorchtest.RequireEnqueued[greet](ctx, t, tx, nil))
	taskorchtest.RequireNotEnqueued[refuse](ctx, t, tx)
	taskorchtest.RequireNotEnqueued[greet](ctx, t, pool) // not committed

	for _, c := range []struct {
		opts *taskorchtest.RequireEnqueuedOpts
		want string
	}{
		{&taskorchtest.RequireEnqueuedOpts{Priority: new(5)}, "priority is 0, want 5"},
		{&taskorchtest.RequireEnqueuedOpts{MaxAttempts: 25}, "max attempts is 3, want 25"},
		{&taskorchtest.RequireEnqueuedOpts{IdempotencyKey: "bob"}, `idempotency key is "ada", want "bob"`},
		{&taskorchtest.RequireEnqueuedOpts{ScheduledAt: at.Add(time.Second)}, "scheduled at"},
		{&taskorchtest.RequireEnqueuedOpts{Status: taskorch.StatusCompleted}, "status is pending, want completed"},
	} {
		msg := fails(t, func(tb testing.TB) { taskorchtest.RequireEnqueued[greet](ctx, tb, tx, c.opts) })
		require.Contains(t, msg, `taskorchtest: task `)
		require.Contains(t, msg, c.want)
	}
	msg := fails(t, func(tb testing.TB) { taskorchtest.RequireEnqueued[refuse](ctx, tb, tx, nil) })
	require.Equal(t, `taskorchtest: no task of type "refuse" was enqueued`, msg)
	msg = fails(t, func(tb testing.TB) { taskorchtest.RequireNotEnqueued[greet](ctx, tb, tx) })
	require.Contains(t, msg, `a task of type "greet" was enqueued`)

	_, err = client.EnqueueTx(ctx, tx, greet{Name: "Bob"}, nil)
	require.NoError(t, err)
	msg = fails(t, func(tb testing.TB) { taskorchtest.RequireEnqueued[greet](ctx, tb, tx, nil) })
	require.Contains(t, msg, `more than one task of type "greet" was enqueued`)

	_, err = client.EnqueueTx(ctx, tx, taskorch.RawArgs{Type: "refuse", Payload: []byte(`{"x": 1}`)}, nil)
	require.NoError(t, err)
	msg = fails(t, func(tb testing.TB) { taskorchtest.RequireEnqueued[numbered](ctx, tb, tx, nil) })
	require.Contains(t, msg, "does not decode into taskorchtest_test.numbered")

	require.NoError(t, tx.Rollback(ctx))
	taskorchtest.RequireNotEnqueued[greet](ctx, t, pool)
}

// numbered decodes tasks of type "refuse" whose x is a string, not a number.
type numbered struct {
	X string `json:"x"`
}

func (numbered) TaskType() string { return "refuse" }

// fails runs fn with a testing.TB that records a failure instead of failing t, and returns the
// failure's message ("" when fn did not fail). Fatalf ends fn's goroutine, as it does a test's.
func fails(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
	}()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.msg, "fn did not fail")
	return rec.msg
}

// recordingTB is the test's TB with the failures recorded, not reported.
type recordingTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.msg == "" {
		r.msg = fmt.Sprintf(format, args...)
	}
}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// StartWorker gives the worker a leader lease of 2 s (not the 15 s default), so that a test
// whose worker must lead — a schedule's — gets a new leader within 2 s of the last one's end.
// The lease the worker holds says so in queues.leader.
func TestStartWorkerShortensTheLeaderLease(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	w := taskorchtest.StartWorker(t, pool, &taskorch.WorkerConfig{Handlers: taskorch.NewHandlers()})
	var left time.Duration
	require.Eventually(t, func() bool {
		var leader *string
		err := pool.QueryRow(t.Context(), `select worker_id, expires_at - clock_timestamp() from queues.leader where name = 'default'`).Scan(&leader, &left)
		return err == nil && leader != nil && *leader == w.ID()
	}, 20*time.Second, 10*time.Millisecond, "the worker leads")
	require.LessOrEqual(t, left, 2*time.Second, "the lease runs 2 s at most")
}
