package taskorch_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

type replayArgs struct{ N int }

func (replayArgs) TaskType() string { return "dwf.replay" }

// A workflow that fails after two steps runs again from the top: the completed steps return
// their recorded results without running, the failed step runs again with the same StepKey,
// and the transactional step writes the application's row exactly once, with its checkpoint.
func TestDurableWorkflowReplaysCompletedSteps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	mustExec(t, pool, `create table app_ledger (task_id bigint, value int); grant insert on app_ledger to worker_service_user`)

	var runs, aRuns, bRuns, cRuns atomic.Int32
	var mu sync.Mutex
	var keys []string
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, args replayArgs) error {
		runs.Add(1)
		a, err := taskorch.Step(wf, "a", func(ctx context.Context) (int, error) {
			aRuns.Add(1)
			return args.N + 1, nil
		})
		if err != nil {
			return err
		}
		b, err := taskorch.Step(wf, "b", func(ctx context.Context) (int, error) {
			mu.Lock()
			keys = append(keys, taskorch.StepKey(ctx))
			mu.Unlock()
			if bRuns.Add(1) == 1 {
				return 0, errors.New("the provider is down")
			}
			return a * 2, nil
		})
		if err != nil {
			return err
		}
		cv, err := taskorch.StepTx(wf, "c", func(ctx context.Context, tx pgx.Tx) (int, error) {
			cRuns.Add(1)
			_, err := tx.Exec(ctx, `insert into app_ledger values ($1, $2)`, wf.Task().ID, b)
			return b + 1, err
		})
		if err != nil {
			return err
		}
		return taskorch.SetResult(ctx, map[string]int{"a": a, "b": b, "c": cv})
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	res, err := c.Enqueue(ctx, replayArgs{N: 4}, nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)

	require.Equal(t, int32(2), runs.Load())
	require.Equal(t, int32(1), aRuns.Load(), "a completed in the first run: replayed, not run")
	require.Equal(t, int32(2), bRuns.Load())
	require.Equal(t, int32(1), cRuns.Load())
	require.Len(t, keys, 2)
	require.Equal(t, keys[0], keys[1], "a step runs again with the same key")
	require.NotEmpty(t, keys[0])
	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.JSONEq(t, `{"a": 5, "b": 10, "c": 11}`, string(task.Result))
	require.Equal(t, []int{10}, scalar[[]int](t, pool, `select array_agg(value) from app_ledger where task_id = $1`, res.TaskID))
	require.Equal(t, []string{"step:a", "step:b", "step_tx:c"}, scalar[[]string](t, pool,
		`select array_agg(kind || ':' || name order by seq) from queues.workflow_step where task_id = $1`, res.TaskID))
	// The checkpoints are facts: never updated; the worker role cannot write them directly.
	err = probeErr(t, pool, `update queues.workflow_step set result = '1'`)
	require.ErrorContains(t, err, "append-only")
	err = probeAs(t, pool, "worker_service_user", `insert into queues.workflow_step (task_id, seq, kind, name, lease_id, attempt) values ($1, 9, 'step', 'x', 1, 1)`, res.TaskID)
	require.ErrorContains(t, err, "permission denied")
	// Deleted with its task.
	mustExec(t, pool, `select * from queues.delete_tasks(array[$1::bigint])`, res.TaskID)
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.workflow_step where task_id = $1`, res.TaskID))
}

type staleArgs struct{}

func (staleArgs) TaskType() string { return "dwf.stale" }

// A worker whose lease was lost before its transactional step began (it expired and another
// claim took the task) has the step refused whole: ErrLeaseLost, the application's row not
// written. The run after it, under a current lease, writes it once.
func TestDurableWorkflowStaleStepTxRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	mustExec(t, pool, `create table app_rows (task_id bigint); grant insert on app_rows to worker_service_user`)

	reached, resume := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	stale := make(chan error, 1)
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, _ staleArgs) error {
		first := runs.Add(1) == 1
		if _, err := taskorch.Step(wf, "a", func(context.Context) (bool, error) { return true, nil }); err != nil {
			return err
		}
		if first {
			close(reached)
			<-resume
		}
		_, err := taskorch.StepTx(wf, "write", func(ctx context.Context, tx pgx.Tx) (bool, error) {
			_, err := tx.Exec(ctx, `insert into app_rows values ($1)`, wf.Task().ID)
			return true, err
		})
		if first {
			stale <- err
		}
		return err
	}, &taskorch.HandlerOpts{Timeout: -1})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 1})

	res, err := c.Enqueue(ctx, staleArgs{}, nil)
	require.NoError(t, err)
	<-reached
	// Another claim takes the task: its lease expires and a thief claims it, in one transaction.
	var thiefLease int64
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `update queues.task set lease_expires_at = clock_timestamp() - interval '1 second' where task_id = $1`, res.TaskID); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `select lease_id from queues.claim_tasks_by_id('thief', array[$1::bigint], interval '5 minutes', array['dwf.stale'])`, res.TaskID).Scan(&thiefLease)
	}))
	close(resume)
	err = <-stale
	require.ErrorIs(t, err, taskorch.ErrLeaseLost)
	require.Zero(t, scalar[int](t, pool, `select count(*) from app_rows`))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.workflow_step where task_id = $1`, res.TaskID))

	// The thief's lease expires too; the worker's next claim runs the workflow again.
	mustExec(t, pool, `update queues.task set lease_expires_at = clock_timestamp() - interval '1 second' where task_id = $1 and lease_id = $2`, res.TaskID, thiefLease)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from app_rows`))
	require.Equal(t, int32(2), runs.Load())
}

type sleepArgs struct{}

func (sleepArgs) TaskType() string { return "dwf.sleep" }

// Sleep ends the run without spending an attempt and makes the task due at the wake time, on the
// database's clock; the next run does not run the steps before it again, and continues after it.
func TestDurableWorkflowSleep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	var runs, before, after atomic.Int32
	slept := make(chan error, 1)
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, _ sleepArgs) error {
		runs.Add(1)
		if _, err := taskorch.Step(wf, "before", func(context.Context) (int, error) { return int(before.Add(1)), nil }); err != nil {
			return err
		}
		if err := wf.Sleep("nap", 1500*time.Millisecond); err != nil {
			select {
			case slept <- err:
			default:
			}
			return err
		}
		_, err := taskorch.Step(wf, "after", func(context.Context) (int, error) { return int(after.Add(1)), nil })
		return err
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	res, err := c.Enqueue(ctx, sleepArgs{}, nil)
	require.NoError(t, err)
	require.ErrorIs(t, <-slept, taskorch.ErrSuspended)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)

	require.Equal(t, int32(2), runs.Load())
	require.Equal(t, int32(1), before.Load())
	require.Equal(t, int32(1), after.Load())
	require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, res.TaskID), "the sleep spent no attempt")
	require.True(t, scalar[bool](t, pool, `select t.completed_at >= s.wake_at and s.wake_at > s.completed_at + interval '1 second'
		from queues.task t join queues.workflow_step s on s.task_id = t.task_id and s.kind = 'sleep' where t.task_id = $1`, res.TaskID),
		"the run after the sleep came after its wake time")
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task_event where task_id = $1 and event = 'snoozed'`, res.TaskID))
}

type changedArgs struct{}

func (changedArgs) TaskType() string { return "dwf.changed" }

// A run that reaches a different durable call at a position than the one recorded there fails the
// task for good, naming both calls.
func TestDurableWorkflowNondeterminism(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	var runs atomic.Int32
	changedErrs := make(chan [2]error, 1)
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, _ changedArgs) error {
		if runs.Add(1) == 1 {
			if _, err := taskorch.Step(wf, "charge", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
			return errors.New("deploy in progress")
		}
		// "Deployed" code calls another step first; later calls are refused too, and returning
		// nil does not complete the task.
		_, err1 := taskorch.Step(wf, "reserve", func(context.Context) (int, error) { return 2, nil })
		_, err2 := taskorch.Step(wf, "ship", func(context.Context) (int, error) { return 3, nil })
		changedErrs <- [2]error{err1, err2}
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	res, err := c.Enqueue(ctx, changedArgs{}, nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusFailed)
	errs := <-changedErrs
	require.ErrorIs(t, errs[0], taskorch.ErrNondeterministic)
	require.ErrorIs(t, errs[1], taskorch.ErrNondeterministic)
	require.Contains(t, lastError(t, pool, res.TaskID), `call 1 was recorded as step "charge", the code now calls step "reserve"`)
	require.Equal(t, int32(2), runs.Load())
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.workflow_step where task_id = $1`, res.TaskID))
}

type versionArgs struct{ Name string }

func (versionArgs) TaskType() string { return "dwf.version" }

// Version lets a deploy change the code of workflows in flight: one that passed the point before
// the call existed gets DefaultVersion and keeps its history lined up; one that had not reached
// it records and gets the new version.
func TestDurableWorkflowVersion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	var deployed atomic.Bool
	var mu sync.Mutex
	got := map[string]int{}
	failOnce := map[string]bool{}
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, args versionArgs) error {
		if _, err := taskorch.Step(wf, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		if !deployed.Load() {
			// The old code: a then b (for "passed"), then fail once to run again under new code.
			if args.Name == "passed" {
				if _, err := taskorch.Step(wf, "b", func(context.Context) (int, error) { return 2, nil }); err != nil {
					return err
				}
			}
			mu.Lock()
			defer mu.Unlock()
			failOnce[args.Name] = true
			return errors.New("stopped before the deploy")
		}
		v, err := wf.Version("new-check", 1)
		if err != nil {
			return err
		}
		mu.Lock()
		got[args.Name] = v
		mu.Unlock()
		if v >= 1 {
			_, err = taskorch.Step(wf, "check", func(context.Context) (int, error) { return 3, nil })
		} else {
			_, err = taskorch.Step(wf, "b", func(context.Context) (int, error) { return 2, nil })
		}
		return err
	})
	// The first runs fail under the old code; then the "deploy".
	passed, err := c.Enqueue(ctx, versionArgs{Name: "passed"}, nil)
	require.NoError(t, err)
	fresh, err := c.Enqueue(ctx, versionArgs{Name: "fresh"}, nil)
	require.NoError(t, err)
	_, stop := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return failOnce["passed"] && failOnce["fresh"]
	}, 20*time.Second, 5*time.Millisecond)
	stop()
	deployed.Store(true)
	mustExec(t, pool, `update queues.task set run_at = now() where status = 'pending'`)
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	waitStatus(t, pool, passed.TaskID, taskorch.StatusCompleted)
	waitStatus(t, pool, fresh.TaskID, taskorch.StatusCompleted)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"passed": taskorch.DefaultVersion, "fresh": 1}, got)
	steps := func(id int64) []string {
		return scalar[[]string](t, pool, `select array_agg(kind || ':' || name order by seq) from queues.workflow_step where task_id = $1`, id)
	}
	require.Equal(t, []string{"step:a", "step:b"}, steps(passed.TaskID), "the version call took no position")
	require.Equal(t, []string{"step:a", "version:new-check", "step:check"}, steps(fresh.TaskID))
}

// Bad input to the durable calls and to the checkpoint function is refused and writes nothing;
// a checkpoint under a lease that is not the task's current one is refused.
func TestDurableWorkflowBadInput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := newClient(t)
	id := scalar[int64](t, pool, `select queues.enqueue('dwf.sql', '{}')`)
	lease := claimOne(t, pool, "dwf.sql", id)
	for sql, want := range map[string]string{
		`select * from queues.record_workflow_step($1, $2, 0, 'step', 'a', null)`:                         "_seq must be between 1 and 100000",
		`select * from queues.record_workflow_step($1, $2, 1, 'banana', 'a', null)`:                       "_kind must be",
		`select * from queues.record_workflow_step($1, $2, 1, 'step', '', null)`:                          "_name must be 1 to 200",
		`select * from queues.record_workflow_step($1, $2, 1, 'sleep', 'a', null)`:                        "a sleep or a signal wait, and only they",
		`select * from queues.record_workflow_step($1, $2, 1, 'step', 'a', null, interval '1 second')`:    "a sleep or a signal wait, and only they",
		`select * from queues.record_workflow_step($1, $2, 1, 'sleep', 'a', null, interval '-1 second')`:  "a sleep or a signal wait, and only they",
		`select * from queues.record_workflow_step($1, $2, 1, 'sleep', 'a', null, interval '9000 years')`: "past the year 9999",
	} {
		requireSQLState(t, probeErr(t, pool, sql, id, lease), "22023", regexp.QuoteMeta(want), sql)
	}
	var ok bool
	require.NoError(t, pool.QueryRow(ctx, `select recorded from queues.record_workflow_step($1, $2, 1, 'step', 'a', '1')`, id, lease+1).Scan(&ok))
	require.False(t, ok, "a stale lease records nothing")
	require.NoError(t, pool.QueryRow(ctx, `select recorded from queues.record_workflow_step($1, $2, 1, 'step', 'a', '1')`, id, lease).Scan(&ok))
	require.True(t, ok)
	require.NoError(t, pool.QueryRow(ctx, `select recorded from queues.record_workflow_step($1, $2, 1, 'step', 'b', '2')`, id, lease).Scan(&ok))
	require.False(t, ok, "a position holds one checkpoint")
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.workflow_step where task_id = $1`, id))
	mustExec(t, pool, `do $$ begin create role dwf_probe nologin; exception when duplicate_object then null; end $$`)
	err := probeAs(t, pool, "dwf_probe", `select * from queues.workflow_steps($1)`, id)
	require.ErrorContains(t, err, "permission denied")
}

// probeErr runs sql in a transaction that is rolled back and returns its error.
func probeErr(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) error {
	t.Helper()
	return probeAs(t, pool, "", sql, args...)
}

// probeAs runs sql as role (the pool's own when "") in a transaction that is rolled back, and
// returns its error.
func probeAs(t testing.TB, pool *pgxpool.Pool, role, sql string, args ...any) error {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	if role != "" {
		_, err = tx.Exec(ctx, `set local role `+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
	}
	_, err = tx.Exec(ctx, sql, args...)
	return err
}
