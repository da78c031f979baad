package taskorch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// promptCancel is how soon a running task's handler must be stopped after its cancellation
// commits (docs/worker.md, "Cancellation").
const promptCancel = time.Second

// A running taskorch.sleep task cancelled with queues.cancel_task is stopped within a second,
// told by NOTIFY: the built-in handler's context is cancelled (it returns context.Canceled) with
// cause ErrTaskCancelled, long before the lease renewal (the default lease: every 100 s), and
// the task stays cancelled.
func TestCancelRunningTaskWithinASecond(t *testing.T) {
	t.Parallel()
	cancelSleepingTask(t, false)
}

// The same for a worker without LISTEN (PollOnly): its periodic check finds the cancellation.
func TestCancelRunningTaskWithinASecondPollOnly(t *testing.T) {
	t.Parallel()
	cancelSleepingTask(t, true)
}

func cancelSleepingTask(t *testing.T, pollOnly bool) {
	ctx := context.Background()
	c, pool := newClient(t)
	hs := taskorch.NewHandlers()
	builtinhandlers.Register(hs)
	tap := newLogTap(t)
	w, _ := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Logger: tap.logger, PollOnly: pollOnly})
	res, err := c.Enqueue(ctx, builtinhandlers.SleepArgs{Millis: 600_000}, nil)
	require.NoError(t, err)
	tap.wait(t, "task started", res.TaskID)
	stopped := tap.expect("task stopped without an outcome", res.TaskID)

	began := time.Now()
	mustExec(t, pool, `select queues.cancel_task($1, 'enough')`, res.TaskID)
	rec := tap.await(t, stopped)
	elapsed := time.Since(began)
	t.Logf("pollOnly=%v: the handler stopped %s after the cancel committed", pollOnly, elapsed)
	require.Less(t, elapsed, promptCancel)
	require.Equal(t, fmt.Sprintf("%v (the handler returned: %v)", taskorch.ErrTaskCancelled, context.Canceled), rec["cause"],
		"the sleep handler returned because its context was cancelled, by the cancellation")
	info := tap.wait(t, "task cancelled; stopping its handler", res.TaskID)
	require.Equal(t, w.ID(), info["worker_id"])
	require.Equal(t, slog.LevelInfo.String(), info["level"])

	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, task.Status)
	require.Equal(t, []string{"claimed:running", "cancelled:cancelled"}, eventsOf(t, c, res.TaskID))
}

// A handler that returns success after its task was cancelled changes nothing: the completion
// is refused under the fenced lease (and recorded as refused), the task stays cancelled, and
// the handler's context said why it was cancelled.
func TestCancelledTaskLateSuccessIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("stubborn", func(ctx context.Context, _ *taskorch.Task) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil // success, after the cancellation
	})
	tap := newLogTap(t)
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Logger: tap.logger})
	res, err := c.Enqueue(ctx, raw("stubborn", `{}`), nil)
	require.NoError(t, err)
	<-started
	refused := tap.expect("completion refused: the lease was lost", res.TaskID)
	began := time.Now()
	_, err = c.Cancel(ctx, res.TaskID)
	require.NoError(t, err)
	got := <-cause
	require.Less(t, time.Since(began), promptCancel)
	require.ErrorIs(t, got, taskorch.ErrTaskCancelled)
	require.ErrorIs(t, got, taskorch.ErrLeaseLost, "a cancellation is a lost lease to handlers that check for one")
	tap.await(t, refused)

	require.Equal(t, int64(1), scalar[int64](t, pool,
		`select count(*) from queues.error where task_id = $1 and error_message like 'completion refused%'`, res.TaskID))
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, task.Status)
	require.Nil(t, task.CompletedAt)
	require.Equal(t, []string{"claimed:running", "cancelled:cancelled"}, eventsOf(t, c, res.TaskID))
}

// Two workers hear every cancellation; each stops only its own task. Worker A runs x1 and x2,
// worker B runs y1 and y2. Cancelling x1 stops x1 alone; cancelling y2 afterwards stops y2,
// and since notifications arrive in commit order, B had heard x1's by then. x2 and y1 run on
// and complete.
func TestCancelStopsOnlyThatTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	type run struct {
		started chan struct{}
		stopped chan error
	}
	runs := sync.Map{} // task id -> *run
	release := make(chan struct{})
	hold := func(ctx context.Context, t *taskorch.Task) error {
		v, _ := runs.Load(t.ID)
		r := v.(*run)
		close(r.started)
		select {
		case <-ctx.Done():
			r.stopped <- context.Cause(ctx)
			return ctx.Err()
		case <-release:
			return nil
		}
	}
	workerFor := func(typ string) {
		hs := taskorch.NewHandlers()
		hs.HandleFunc(typ, hold)
		startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 2})
	}
	enqueue := func(typ string) int64 {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		res, err := c.EnqueueTx(ctx, tx, raw(typ, `{}`), nil)
		require.NoError(t, err)
		runs.Store(res.TaskID, &run{started: make(chan struct{}), stopped: make(chan error, 1)})
		require.NoError(t, tx.Commit(ctx))
		return res.TaskID
	}
	get := func(id int64) *run { v, _ := runs.Load(id); return v.(*run) }

	x1, x2, y1, y2 := enqueue("on_a"), enqueue("on_a"), enqueue("on_b"), enqueue("on_b")
	workerFor("on_a")
	workerFor("on_b")
	for _, id := range []int64{x1, x2, y1, y2} {
		<-get(id).started
	}

	_, err := c.Cancel(ctx, x1)
	require.NoError(t, err)
	require.ErrorIs(t, <-get(x1).stopped, taskorch.ErrTaskCancelled)
	_, err = c.Cancel(ctx, y2)
	require.NoError(t, err)
	require.ErrorIs(t, <-get(y2).stopped, taskorch.ErrTaskCancelled)

	for _, id := range []int64{x2, y1} {
		select {
		case err := <-get(id).stopped:
			t.Fatalf("task %d was stopped: %v", id, err)
		default:
		}
		require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
	}
	close(release)
	waitStatus(t, pool, x2, taskorch.StatusCompleted)
	waitStatus(t, pool, y1, taskorch.StatusCompleted)
	for _, id := range []int64{x1, y2} {
		require.Equal(t, "cancelled", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
	}
}

// A cancellation committed while the worker's LISTEN connection is down, its notification
// lost, is found within a second all the same: the worker checks its running tasks when the
// connection is back, and polls for cancellations while it is down.
func TestCancelWhileListenIsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("cut_off", func(ctx context.Context, _ *taskorch.Task) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	tap := newLogTap(t)
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Logger: tap.logger})
	res, err := c.Enqueue(ctx, raw("cut_off", `{}`), nil)
	require.NoError(t, err)
	<-started

	lost := tap.expect("LISTEN connection lost; polling until it is back", 0)
	// The task may have been claimed by the first poll, before the LISTEN connection is up.
	require.Eventually(t, func() bool {
		return scalar[int64](t, pool, `select count(*) from pg_stat_activity
			where datname = current_database() and pid <> pg_backend_pid() and query ilike 'listen%'`) == 1
	}, 10*time.Second, 5*time.Millisecond, "the worker's LISTEN connection")
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(pg_terminate_backend(pid)) from pg_stat_activity
		where datname = current_database() and pid <> pg_backend_pid() and query ilike 'listen%'`), "the worker's LISTEN connection")
	tap.await(t, lost)
	began := time.Now()
	_, err = c.Cancel(ctx, res.TaskID)
	require.NoError(t, err)
	select {
	case got := <-cause:
		t.Logf("stopped %s after the cancel", time.Since(began))
		require.ErrorIs(t, got, taskorch.ErrTaskCancelled)
		require.Less(t, time.Since(began), promptCancel)
	case <-time.After(20 * time.Second):
		t.Fatal("the task cancelled while LISTEN was down was not stopped")
	}
}

// A task cancelled after its claim committed and before the worker started it is still stopped
// promptly: the notification, which named no running task, is remembered, and the start finds
// it. The pool reaches PostgreSQL through a proxy that hands answers back 400 ms late while the
// LISTEN connection is direct (ListenConfig), so the cancel, the NOTIFY and its arrival all fall
// between the claim's commit and the worker seeing its rows.
func TestCancelBetweenClaimAndStart(t *testing.T) {
	t.Parallel()
	const delay = 400 * time.Millisecond
	ctx := context.Background()
	url := dbtest.NewDBURL(t)
	direct, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(direct.Close)
	c, err := taskorch.NewClient(direct, nil)
	require.NoError(t, err)

	pcfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	listen := pcfg.ConnConfig.Copy()
	proxy := startDelayProxy(t, net.JoinHostPort(pcfg.ConnConfig.Host, strconv.Itoa(int(pcfg.ConnConfig.Port))), delay, delay)
	pcfg.ConnConfig.Host, pcfg.ConnConfig.Port = "127.0.0.1", proxy.Port()
	slow, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(slow.Close)

	started := make(chan struct{})
	cause := make(chan error, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("late_start", func(ctx context.Context, _ *taskorch.Task) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	w, _ := startWorker(t, slow, &taskorch.WorkerConfig{Handlers: hs, ListenConfig: listen})
	require.Eventually(t, func() bool {
		return scalar[bool](t, direct, `select exists (select from queues.worker where worker_id = $1)`, w.ID())
	}, 20*time.Second, 5*time.Millisecond)

	res, err := c.Enqueue(ctx, raw("late_start", `{}`), nil)
	require.NoError(t, err)
	waitStatus(t, direct, res.TaskID, taskorch.StatusRunning) // claimed: the rows are on their way
	began := time.Now()
	_, err = c.Cancel(ctx, res.TaskID)
	require.NoError(t, err)
	select {
	case <-started:
		t.Fatal("the handler started before the cancel: this run missed the window it tests")
	default:
	}
	select {
	case got := <-cause:
		// The claim's rows, then the check's round trips, each a delay late; without the
		// remembered notification only the lease renewal (every 100 s) would find it.
		t.Logf("stopped %s after the cancel", time.Since(began))
		require.ErrorIs(t, got, taskorch.ErrTaskCancelled)
		require.Less(t, time.Since(began), 10*time.Second)
	case <-time.After(20 * time.Second):
		t.Fatal("the task cancelled before its start was not stopped")
	}
}

// queues.cancel_task notifies taskorch_cancel with '<task_id>:<lease_id>' for a running task
// only, at commit: a rolled-back cancel and the cancel of a pending task send nothing.
func TestCancelTaskNotifiesRunningOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	listener := conn.Hijack()
	t.Cleanup(func() { _ = listener.Close(context.Background()) })
	_, err = listener.Exec(ctx, `listen taskorch_cancel`)
	require.NoError(t, err)

	pending, err := c.Enqueue(ctx, raw("cn_pending", `{}`), nil)
	require.NoError(t, err)
	running, err := c.Enqueue(ctx, raw("cn_running", `{}`), nil)
	require.NoError(t, err)
	var lease int64
	require.NoError(t, pool.QueryRow(ctx, `select lease_id from queues.claim_tasks('w', 1, interval '1 hour', '{cn_running}')`).Scan(&lease))

	_, err = c.Cancel(ctx, pending.TaskID)
	require.NoError(t, err)
	require.ErrorIs(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `select queues.cancel_task($1)`, running.TaskID)
		require.NoError(t, err)
		return errRolledBack
	}), errRolledBack)
	require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, running.TaskID))
	_, err = c.Cancel(ctx, running.TaskID)
	require.NoError(t, err)
	_, err = c.Cancel(ctx, running.TaskID) // a repeat: already cancelled, nothing more
	require.NoError(t, err)
	mustExec(t, pool, `select pg_notify('taskorch_cancel', 'end')`)

	var got []string
	for {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		require.NoError(t, err)
		if n.Payload == "end" {
			break
		}
		got = append(got, n.Payload)
	}
	require.Equal(t, []string{fmt.Sprintf("%d:%d", running.TaskID, lease)}, got)
}

var errRolledBack = errors.New("rolled back on purpose")

// queues.lost_leases names the pairs no longer held, with the task's status now, and refuses
// arrays of different lengths with a clear error.
func TestLostLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	var ids [3]int64
	for i := range ids {
		res, err := c.Enqueue(ctx, raw("ll", fmt.Sprintf(`{"i": %d}`, i)), nil)
		require.NoError(t, err)
		ids[i] = res.TaskID
	}
	leases := map[int64]int64{}
	for _, cl := range claim(t, pool, "w", 3, "1 hour") {
		leases[cl.TaskID] = cl.LeaseID
	}
	_, err := c.Cancel(ctx, ids[1])
	require.NoError(t, err)
	mustExec(t, pool, `select queues.complete_task($1, $2)`, ids[2], leases[ids[2]])

	rows, err := pool.Query(ctx, `select task_id, status::text from queues.lost_leases($1, $2) order by 1`,
		[]int64{ids[0], ids[0], ids[1], ids[2], 987654321},
		[]int64{leases[ids[0]], leases[ids[0]] + 1000, leases[ids[1]], leases[ids[2]], 1})
	require.NoError(t, err)
	type lost struct {
		ID     int64
		Status *string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[lost])
	require.NoError(t, err)
	str := func(s string) *string { return &s }
	require.Equal(t, []lost{
		{ids[0], str("running")}, // held, but not under that lease
		{ids[1], str("cancelled")},
		{ids[2], str("completed")},
		{987654321, nil}, // no such task
	}, got)

	for _, sql := range []string{
		`select * from queues.lost_leases('{1,2}', '{1}')`,
		`select * from queues.lost_leases(null, '{1}')`,
		`select * from queues.lost_leases('{1}', null)`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.ErrorContains(t, err, "_task_ids and _lease_ids must be arrays of the same length", sql)
		require.ErrorContains(t, err, "SQLSTATE 22023", sql)
	}
	require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, ids[0]),
		"asking changes nothing")
}

// logTap is a worker logger that shows lines in the test's log and lets a test wait for a line
// about a task: a signal, not a sleep.
type logTap struct {
	t      *testing.T
	logger *slog.Logger
	mu     sync.Mutex
	seen   []map[string]any
	waits  []logWait
}

type logWait struct {
	msg  string
	task int64
	ch   chan map[string]any
}

// matches reports whether rec is the line w waits for: its message, about its task (0: any).
func (w logWait) matches(rec map[string]any) bool {
	return rec["msg"] == w.msg && (w.task == 0 || rec["task_id"] == w.task)
}

func newLogTap(t *testing.T) *logTap {
	l := &logTap{t: t}
	l.logger = slog.New(&tapHandler{tap: l, inner: testLogger(t).Handler()})
	return l
}

// expect returns a channel that gets the first line with message msg about task (0: any),
// logged before or after the call.
func (l *logTap) expect(msg string, task int64) <-chan map[string]any {
	ch := make(chan map[string]any, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, rec := range l.seen {
		if w := (logWait{msg: msg, task: task}); w.matches(rec) {
			ch <- rec
			return ch
		}
	}
	l.waits = append(l.waits, logWait{msg: msg, task: task, ch: ch})
	return ch
}

// await waits for a line expect announced, for up to 20 seconds.
func (l *logTap) await(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case rec := <-ch:
		return rec
	case <-time.After(20 * time.Second):
		t.Fatal("the log line did not come")
		return nil
	}
}

// wait waits for a line with message msg about task.
func (l *logTap) wait(t *testing.T, msg string, task int64) map[string]any {
	t.Helper()
	return l.await(t, l.expect(msg, task))
}

func (l *logTap) record(rec map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, rec)
	kept := l.waits[:0]
	for _, w := range l.waits {
		if w.matches(rec) {
			w.ch <- rec
			continue
		}
		kept = append(kept, w)
	}
	l.waits = kept
}

type tapHandler struct {
	tap   *logTap
	inner slog.Handler
	attrs []slog.Attr
}

func (h *tapHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *tapHandler) Handle(ctx context.Context, r slog.Record) error {
	rec := map[string]any{"msg": r.Message, "level": r.Level.String()}
	add := func(a slog.Attr) bool {
		rec[a.Key] = a.Value.Resolve().Any()
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.tap.record(rec)
	return h.inner.Handle(ctx, r)
}

func (h *tapHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &tapHandler{tap: h.tap, inner: h.inner.WithAttrs(attrs), attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h *tapHandler) WithGroup(name string) slog.Handler {
	return &tapHandler{tap: h.tap, inner: h.inner.WithGroup(name), attrs: h.attrs}
}
