package taskorch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/testfixtures"
)

type greet struct {
	Name string `json:"name"`
}

func (greet) TaskType() string { return "greet" }

// A typed Go handler gets its payload decoded; a payload of the wrong shape fails for good.
func TestWorkerTypedHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	got := make(chan string, 4)
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, task *taskorch.TaskFor[greet]) error {
		got <- task.Args.Name
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	res, err := c.Enqueue(ctx, greet{Name: "Ada"}, nil)
	require.NoError(t, err)
	require.Equal(t, "Ada", <-got)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)

	bad, err := c.Enqueue(ctx, raw("greet", `{"name": 42}`), nil)
	require.NoError(t, err)
	waitStatus(t, pool, bad.TaskID, taskorch.StatusFailed)
	require.Contains(t, lastError(t, pool, bad.TaskID), "payload does not decode into taskorch_test.greet")
}

// A db_function task runs its supervisor, which enqueues a child; the function's writes and the
// completion commit together.
func TestWorkerDBFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, testfixtures.WorkerSQL)
	children := make(chan string, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("child", func(ctx context.Context, task *taskorch.Task) error {
		var p struct{ Parent string }
		_ = json.Unmarshal(task.Payload, &p)
		children <- p.Parent
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	res, err := c.Enqueue(ctx, raw("db_function", `{"db_function": "wbiz.supervisor", "note": "hello"}`), nil)
	require.NoError(t, err)
	require.Equal(t, "hello", <-children)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from wbiz.effect where note = 'hello'`))
}

// Outcomes a db_function can have besides success, each recorded clearly and the worker going on.
func TestWorkerDBFunctionOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, testfixtures.WorkerSQL)
	noRetryDelay(t, pool)
	startWorker(t, pool, &taskorch.WorkerConfig{TaskTimeout: 2 * time.Second}) // the quick functions must fit even on a loaded machine; wbiz.slow sleeps 30 s

	enq := func(payload string, maxAttempts int) int64 {
		res, err := c.Enqueue(ctx, raw("db_function", payload), &taskorch.EnqueueOpts{MaxAttempts: maxAttempts})
		require.NoError(t, err)
		return res.TaskID
	}
	invalid := enq(`{"db_function": "wbiz.invalid"}`, 5)
	named := enq(`{"db_function": "wbiz.named_status"}`, 5)
	raises := enq(`{"db_function": "wbiz.raises", "n": 7}`, 2)
	garbage := enq(`{"db_function": "wbiz.garbage"}`, 5)
	slow := enq(`{"db_function": "wbiz.slow"}`, 1)

	// A missing function, a missing name and a malformed one are refused when enqueued
	// (docs/security.md, "Who may name a function")...
	for _, payload := range []string{
		`{"db_function": "wbiz.nope"}`,
		`{"note": "no function"}`,
		`{"db_function": "public.f(jsonb); drop table queues.task; --"}`,
	} {
		_, err := c.Enqueue(ctx, raw("db_function", payload), nil)
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, payload)
	}
	// ...and the worker refuses them too when they are in the table anyway: a function dropped
	// after its task was enqueued, rows written past the check (by an older version).
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `create function wbiz.nope(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$`)
	require.NoError(t, err)
	var missing int64
	require.NoError(t, tx.QueryRow(ctx, `select queues.enqueue('db_function', '{"db_function": "wbiz.nope"}', _max_attempts => 5)`).Scan(&missing))
	_, err = tx.Exec(ctx, `drop function wbiz.nope(jsonb)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	unchecked := func(payload string) int64 {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `alter table queues.task disable trigger task_functions_permitted`)
		require.NoError(t, err)
		var id int64
		require.NoError(t, tx.QueryRow(ctx, `insert into queues.task (task_type, payload, max_attempts) values ('db_function', $1, 5) returning task_id`, payload).Scan(&id))
		_, err = tx.Exec(ctx, `alter table queues.task enable trigger task_functions_permitted`)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return id
	}
	noName := unchecked(`{"note": "no function"}`)
	injected := unchecked(`{"db_function": "public.f(jsonb); drop table queues.task; --"}`)

	// A validation failure is recorded and not retried; the function's writes stand.
	waitStatus(t, pool, invalid, taskorch.StatusFailed)
	require.Contains(t, lastError(t, pool, invalid), "wbiz.invalid: validation failure: account 7 does not exist")
	require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, invalid))
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from wbiz.effect where note = 'invalid ran'`))

	waitStatus(t, pool, named, taskorch.StatusFailed)
	require.Contains(t, lastError(t, pool, named), `status "max_attempts_reached"`)

	// An exception rolls the function back and fails the attempt; retried, then dead.
	waitStatus(t, pool, raises, taskorch.StatusDead)
	require.Contains(t, lastError(t, pool, raises), "wbiz.raises: boom 7")
	require.Equal(t, int64(0), scalar[int64](t, pool, `select count(*) from wbiz.effect where note = 'raises ran'`))
	require.Equal(t, int64(2), scalar[int64](t, pool, `select count(*) from queues.task_lease where task_id = $1`, raises))

	waitStatus(t, pool, garbage, taskorch.StatusFailed)
	require.Contains(t, lastError(t, pool, garbage), "malformed envelope")

	waitStatus(t, pool, missing, taskorch.StatusFailed)
	require.Contains(t, lastError(t, pool, missing), "wbiz.nope")

	waitStatus(t, pool, noName, taskorch.StatusFailed)
	require.Contains(t, lastError(t, pool, noName), `has no "db_function"`)

	waitStatus(t, pool, injected, taskorch.StatusFailed)
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from pg_tables where schemaname = 'queues' and tablename = 'task'`))

	// A function running past the task timeout is cancelled and the attempt fails.
	waitStatus(t, pool, slow, taskorch.StatusDead)
	require.Contains(t, lastError(t, pool, slow), "timed out after 2s")
}

// Unknown types fail with a clear message on a worker that claims them (ClaimUnknownTypes);
// panics and timeouts of Go handlers fail the attempt; retries back off and end dead; Snooze and
// Discard do what they say.
func TestWorkerGoHandlerOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	var flakyRuns, snoozeRuns atomic.Int32
	hs := taskorch.NewHandlers()
	hs.HandleFunc("panics", func(context.Context, *taskorch.Task) error { panic("kaboom") })
	hs.HandleFunc("hangs", func(ctx context.Context, _ *taskorch.Task) error { <-ctx.Done(); return ctx.Err() })
	hs.HandleFunc("flaky", func(context.Context, *taskorch.Task) error {
		return fmt.Errorf("flaky run %d", flakyRuns.Add(1))
	})
	hs.HandleFunc("snoozes", func(context.Context, *taskorch.Task) error {
		if snoozeRuns.Add(1) == 1 {
			return taskorch.Snooze(time.Millisecond)
		}
		return nil
	})
	hs.HandleFunc("discards", func(context.Context, *taskorch.Task) error {
		return taskorch.Discard(errors.New("bad input, no retry"))
	})
	hs.HandleFunc("huge_error", func(context.Context, *taskorch.Task) error {
		return errors.New(strings.Repeat("é\x00\xff", 1<<18)) // 1 MiB of NULs and invalid UTF-8

	})
	// Long enough that no quick handler times out on a loaded machine (the huge error takes a
	// moment to build); "hangs" waits it out.
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, TaskTimeout: time.Second, ClaimUnknownTypes: true})

	enq := func(typ string, maxAttempts int) int64 {
		res, err := c.Enqueue(ctx, raw(typ, `{}`), &taskorch.EnqueueOpts{MaxAttempts: maxAttempts})
		require.NoError(t, err)
		return res.TaskID
	}
	unknown := enq("nobody_handles_this", 5)
	panics := enq("panics", 1)
	hangs := enq("hangs", 1)
	flaky := enq("flaky", 3)
	snoozes := enq("snoozes", 1)
	discards := enq("discards", 5)
	huge := enq("huge_error", 1)

	waitStatus(t, pool, unknown, taskorch.StatusFailed)
	require.Contains(t, lastError(t, pool, unknown), `unknown task type "nobody_handles_this"`)
	waitStatus(t, pool, panics, taskorch.StatusDead)
	require.Contains(t, lastError(t, pool, panics), "handler panicked: kaboom")
	waitStatus(t, pool, hangs, taskorch.StatusDead)
	require.Contains(t, lastError(t, pool, hangs), "timed out after 1s")
	waitStatus(t, pool, flaky, taskorch.StatusDead)
	require.Equal(t, int32(3), flakyRuns.Load())
	require.Equal(t, []string{"claimed:running", "retry_scheduled:pending", "claimed:running", "retry_scheduled:pending",
		"claimed:running", "dead:dead"}, eventsOf(t, c, flaky))
	waitStatus(t, pool, snoozes, taskorch.StatusCompleted)
	require.Equal(t, int32(2), snoozeRuns.Load(), "snoozed once, then ran again without spending its only attempt")
	waitStatus(t, pool, discards, taskorch.StatusFailed)
	require.Equal(t, "bad input, no retry", lastError(t, pool, discards))
	waitStatus(t, pool, huge, taskorch.StatusDead)
	hugeErr := lastError(t, pool, huge)
	require.LessOrEqual(t, len(hugeErr), 8192, "errors are bounded")
	require.True(t, strings.HasPrefix(hugeErr, `é\x00\uFFFD`) || strings.HasPrefix(hugeErr, "é\\x00\uFFFD"), "stored, made printable: %.40q", hugeErr)
}

// The handler invoker: before handler → provider → success handler with {original_payload,
// worker_payload}, or error handler with {original_payload, error}; the task is completed either
// way (its supervisor owns retries), and the failure is in queues.error. A channel without a
// provider fails its tasks on a worker that claims them anyway (ClaimUnknownTypes).
func TestWorkerChannelInvoker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, testfixtures.WorkerSQL)
	var calls atomic.Int32
	provider := taskorch.ChannelProviderFunc(func(ctx context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
		calls.Add(1)
		var req struct {
			To string `json:"to_address"`
		}
		if err := json.Unmarshal(call.Request, &req); err != nil {
			return nil, err
		}
		if req.To == "down@example.com" {
			return nil, errors.New("provider answered 503")
		}
		return json.RawMessage(fmt.Sprintf(`{"id": "msg-%d", "key": %q}`, call.Task.ID, call.IdempotencyKey)), nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: provider}, ClaimUnknownTypes: true})

	handlers := `"before_handler": "wbiz.before", "success_handler": "wbiz.on_success", "error_handler": "wbiz.on_error"`
	ok, err := c.Enqueue(ctx, raw("email", `{"to": "ada@example.com", "attempt_id": 1, `+handlers+`}`), nil)
	require.NoError(t, err)
	down, err := c.Enqueue(ctx, raw("email", `{"to": "down@example.com", "attempt_id": 2, `+handlers+`}`), nil)
	require.NoError(t, err)
	refused, err := c.Enqueue(ctx, raw("email", `{"attempt_id": 3, `+handlers+`}`), nil)
	require.NoError(t, err)
	noProvider, err := c.Enqueue(ctx, raw("sms", `{"to": "+15550100"}`), nil)
	require.NoError(t, err)

	for _, id := range []int64{ok.TaskID, down.TaskID, refused.TaskID} {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	success := scalar[map[string]any](t, pool, `select body from wbiz.channel_fact where kind = 'success'`)
	require.EqualValues(t, 1, success["original_payload"].(map[string]any)["attempt_id"])
	require.Equal(t, fmt.Sprintf("msg-%d", ok.TaskID), success["worker_payload"].(map[string]any)["id"])
	require.Equal(t, fmt.Sprintf("taskorch-task-%d", ok.TaskID), success["worker_payload"].(map[string]any)["key"])

	failures := scalar[[]string](t, pool,
		`select array_agg(body->>'error' order by body->'original_payload'->>'attempt_id') from wbiz.channel_fact where kind = 'error'`)
	require.Equal(t, []string{"email provider: provider answered 503", "before handler wbiz.before: validation failure: no recipient"}, failures)
	require.Contains(t, lastError(t, pool, down.TaskID), "provider answered 503")
	require.Equal(t, int32(2), calls.Load(), "the refused task never reached the provider")

	// The completed tasks say whether their call failed: Get, List and the 'completed' event.
	want := map[int64]struct{ failure, outcome, lastError string }{
		ok.TaskID:      {"", "completed", ""},
		down.TaskID:    {taskorch.CallFailureProvider, "completed · provider failed", "email provider: provider answered 503"},
		refused.TaskID: {taskorch.CallFailureBeforeHandlerRefused, "completed · before handler failed", "before handler wbiz.before: validation failure: no recipient"},
	}
	listed, err := c.List(ctx, &taskorch.ListParams{Types: []string{"email"}, Statuses: []taskorch.Status{taskorch.StatusCompleted}})
	require.NoError(t, err)
	require.Len(t, listed.Tasks, 3)
	for _, lt := range listed.Tasks {
		w := want[lt.ID]
		got, err := c.Get(ctx, lt.ID)
		require.NoError(t, err)
		for _, task := range []*taskorch.Task{lt, got} {
			require.Equal(t, w.outcome, task.Outcome(), "task %d", task.ID)
			if w.failure == "" {
				require.Nil(t, task.CallFailure)
				require.Nil(t, task.LastError)
				continue
			}
			require.Equal(t, w.failure, *task.CallFailure)
			require.Equal(t, w.lastError, *task.LastError)
		}
		detail := scalar[*string](t, pool, `select detail from queues.task_history where task_id = $1 and event = 'completed'`, lt.ID)
		if w.failure == "" {
			require.Nil(t, detail)
		} else {
			require.Equal(t, w.lastError, *detail)
		}
	}

	waitStatus(t, pool, noProvider.TaskID, taskorch.StatusFailed)
	require.Contains(t, lastError(t, pool, noProvider.TaskID), "no provider is configured for the sms channel")
}

// A task cancelled while it runs: its handler's context is cancelled with a cause that is
// ErrLeaseLost (ErrTaskCancelled, cancel_test.go), and nothing it does later is recorded.
func TestWorkerLeaseLostCancelsHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("long", func(ctx context.Context, _ *taskorch.Task) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, LeaseDuration: time.Second})
	res, err := c.Enqueue(ctx, raw("long", `{}`), nil)
	require.NoError(t, err)
	<-started
	_, err = c.Cancel(ctx, res.TaskID)
	require.NoError(t, err)
	require.ErrorIs(t, <-cause, taskorch.ErrLeaseLost)
	require.Eventually(t, func() bool {
		return scalar[int64](t, pool, `select count(*) from queues.error where task_id = $1 and error_message like 'completion refused%'`, res.TaskID) == 1
	}, 10*time.Second, 5*time.Millisecond)
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, task.Status)
}

// Leases of long tasks are renewed while they run.
func TestWorkerRenewsLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	release := make(chan struct{})
	hs := taskorch.NewHandlers()
	hs.HandleFunc("long", func(ctx context.Context, _ *taskorch.Task) error { <-release; return nil })
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, LeaseDuration: time.Second})
	res, err := c.Enqueue(ctx, raw("long", `{}`), nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusRunning)
	first := scalar[time.Time](t, pool, `select lease_expires_at from queues.task where task_id = $1`, res.TaskID)
	require.Eventually(t, func() bool {
		return scalar[time.Time](t, pool, `select lease_expires_at from queues.task where task_id = $1`, res.TaskID).After(first)
	}, 10*time.Second, 10*time.Millisecond)
	close(release)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from queues.task_lease where task_id = $1`, res.TaskID),
		"renewal does not make a new lease")
}

// On shutdown, running tasks get the grace period; what is still running after it is cancelled
// and given back to pending without spending its attempt. Nothing is lost.
func TestWorkerGracefulShutdown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	startedQuick, startedStuck := make(chan struct{}), make(chan struct{})
	finishQuick := make(chan struct{})
	hs := taskorch.NewHandlers()
	hs.HandleFunc("quick", func(ctx context.Context, _ *taskorch.Task) error {
		close(startedQuick)
		<-finishQuick
		return nil
	})
	hs.HandleFunc("stuck", func(ctx context.Context, _ *taskorch.Task) error {
		close(startedStuck)
		<-ctx.Done()
		return ctx.Err()
	})
	_, stop := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, ShutdownGrace: 300 * time.Millisecond})
	quick, err := c.Enqueue(ctx, raw("quick", `{}`), nil)
	require.NoError(t, err)
	stuck, err := c.Enqueue(ctx, raw("stuck", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)
	<-startedQuick
	<-startedStuck

	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	close(finishQuick) // finishes within the grace period
	<-stopped

	waitStatus(t, pool, quick.TaskID, taskorch.StatusCompleted)
	task, err := c.Get(ctx, stuck.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusPending, task.Status, "given back, not stranded")
	require.Equal(t, 0, task.Attempt, "a task given back at shutdown keeps its attempt")
	events := eventsOf(t, c, stuck.TaskID)
	require.Equal(t, "released:pending", events[len(events)-1])
}

// Poll-only mode (for transaction-pooling proxies): no LISTEN, no prepared statements, tasks
// still run.
func TestWorkerPollOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDBURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	ran := make(chan struct{}, 3)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("polled", func(context.Context, *taskorch.Task) error { ran <- struct{}{}; return nil })
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, PollOnly: true})
	for range 3 {
		_, err := c.Enqueue(ctx, raw("polled", `{}`), nil)
		require.NoError(t, err)
	}
	for range 3 {
		<-ran
	}
	require.Zero(t, scalar[int64](t, pool, `select count(*) from pg_stat_activity where datname = current_database() and query ilike 'listen%'`))
}
