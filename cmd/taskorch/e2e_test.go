package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/testfixtures"
)

// A stock worker process runs every kind of task and records each outcome clearly; a type it has
// no handler for it leaves pending, unclaimed.
func TestE2EWorkerProcess(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	_, err := pool.Exec(context.Background(), testfixtures.WorkerSQL)
	require.NoError(t, err)
	// Every task's timeout, long enough that a loaded machine never times out the quick ones (at
	// 1 s, wbiz.invalid once timed out, was retried, and its "not retried" check saw attempt 2).
	startWorkerProc(t, url, "TASKORCH_TASK_TIMEOUT=5s", "TASKORCH_CONCURRENCY=8")

	supervisor := enqueue(t, pool, "db_function", `{"db_function": "wbiz.supervisor", "note": "e2e", "child_type": "taskorch.noop"}`, 0)
	typed := enqueue(t, pool, "taskorch.sleep", `{"ms": 10}`, 0)
	unknown := enqueue(t, pool, "no_such_type", `{}`, 0)
	invalid := enqueue(t, pool, "db_function", `{"db_function": "wbiz.invalid"}`, 0)
	panics := enqueue(t, pool, "taskorch.fail", `{"panic": true, "message": "kaboom"}`, 1)
	timeout := enqueue(t, pool, "taskorch.sleep", `{"ms": 60000}`, 1)
	flaky := enqueue(t, pool, "taskorch.fail", `{"message": "flaky"}`, 2)
	// An injected function name is refused when enqueued (docs/security.md, "Who may name a
	// function"); the worker's own refusal is tested in the root package.
	_, err = pool.Exec(context.Background(), `select queues.enqueue('db_function', '{"db_function": "wbiz.ok; drop table queues.task; --"}')`)
	require.ErrorContains(t, err, "is malformed")

	waitStatus(t, pool, supervisor, "completed")
	waitFor(t, pool, "the supervisor's child completed",
		`select exists (select from queues.task where task_type = 'taskorch.noop' and payload->>'parent' = 'e2e' and status = 'completed')`)
	require.Equal(t, int64(1), q[int64](t, pool, `select count(*) from wbiz.effect where note = 'e2e'`))
	waitStatus(t, pool, typed, "completed")

	waitStatus(t, pool, invalid, "failed")
	require.Contains(t, lastErr(t, pool, invalid), "validation failure: account 7 does not exist")
	require.Equal(t, 1, q[int](t, pool, `select attempt from queues.task where task_id = $1`, invalid), "not retried")
	waitStatus(t, pool, panics, "dead")
	require.Contains(t, lastErr(t, pool, panics), "handler panicked: kaboom")
	waitStatus(t, pool, timeout, "dead")
	require.Contains(t, lastErr(t, pool, timeout), "timed out after 5s")
	waitStatus(t, pool, flaky, "dead") // after a real backoff of up to 2s
	require.Equal(t, int64(2), q[int64](t, pool, `select count(*) from queues.task_lease where task_id = $1`, flaky))
	require.Equal(t, "retry_scheduled", q[string](t, pool,
		`select event from queues.task_event where task_id = $1 and event <> 'claimed' order by task_event_id limit 1`, flaky))
	require.True(t, q[bool](t, pool, `select to_regclass('queues.task') is not null`))
	// Every task enqueued after it was claimed: it was passed over, not claimed.
	require.Equal(t, "pending 0 0", q[string](t, pool, `select format('%s %s %s', status, attempt,
		(select count(*) from queues.task_lease l where l.task_id = t.task_id)) from queues.task t where task_id = $1`, unknown))
}

// A worker killed with SIGKILL in the middle of a db_function: once its session is gone (or its
// lease expires, whichever the other worker sees first: the killed worker's backend holds the
// task's row until it notices its client gone), another worker runs the task; the killed
// attempt's writes were rolled back, so the effect exists once.
func TestE2ECrashRecoveryDBFunction(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	_, err := pool.Exec(context.Background(), testfixtures.WorkerSQL+`update wbiz.sleep_control set ms = 600000;`)
	require.NoError(t, err)

	first := startWorkerProc(t, url, "TASKORCH_LEASE_DURATION=2s", "TASKORCH_WORKER_ID=first")
	id := enqueue(t, pool, "db_function", `{"db_function": "wbiz.effect_then_sleep", "note": "once"}`, 0)
	waitFor(t, pool, "the function is running", `select exists (select from pg_stat_activity where datname = current_database() and query like '%run_function%' and state = 'active' and pid <> pg_backend_pid())`)
	first.signal(t, syscall.SIGKILL)
	first.wait(t)
	_, err = pool.Exec(context.Background(), `update wbiz.sleep_control set ms = 0`)
	require.NoError(t, err)

	startWorkerProc(t, url, "TASKORCH_LEASE_DURATION=2s", "TASKORCH_WORKER_ID=second")
	waitStatus(t, pool, id, "completed")
	require.Equal(t, int64(1), q[int64](t, pool, `select count(*) from wbiz.effect where note = 'once'`), "the effect is applied exactly once")
	require.Equal(t, []string{"first", "second"}, q[[]string](t, pool,
		`select array_agg(worker_id order by task_lease_id) from queues.task_lease where task_id = $1`, id))
	require.Contains(t, []string{"lease_expired", "recovered"}, q[string](t, pool,
		`select event from queues.task_event where task_id = $1 and lease_id = (select min(task_lease_id) from queues.task_lease where task_id = $1)`, id))
}

// A worker paused (SIGSTOP) past its lease wakes up (SIGCONT) and tries to finish: another worker
// has completed the task meanwhile, and the late completion is refused and recorded.
func TestE2EStaleWorkerIsFenced(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	paused := startWorkerProc(t, url, "TASKORCH_LEASE_DURATION=1s", "TASKORCH_WORKER_ID=paused")
	id := enqueue(t, pool, "taskorch.sleep", `{"ms": 1500}`, 0)
	waitFor(t, pool, "claimed by the first worker", `select coalesce(worker_id = 'paused', false) from queues.task where task_id = $1`, id)
	paused.signal(t, syscall.SIGSTOP)
	waitFor(t, pool, "lease expired", `select coalesce(lease_expires_at < clock_timestamp(), false) from queues.task where task_id = $1`, id)

	startWorkerProc(t, url, "TASKORCH_LEASE_DURATION=1s", "TASKORCH_WORKER_ID=other")
	waitStatus(t, pool, id, "completed")
	require.Equal(t, "other", q[string](t, pool, `select worker_id from queues.task where task_id = $1`, id))

	// On waking, the stale worker either finishes the handler first and tries to complete (refused
	// and recorded), or its renewer finds the lease gone first and cancels the handler. Either
	// way it is fenced.
	paused.signal(t, syscall.SIGCONT)
	require.Eventually(t, func() bool {
		log := paused.out.String()
		return strings.Contains(log, `"msg":"completion refused: the lease was lost"`) ||
			strings.Contains(log, `"msg":"lease lost; cancelling the task"`)
	}, 30*time.Second, 10*time.Millisecond, "the stale worker noticed it lost the lease")
	if strings.Contains(paused.out.String(), "completion refused") {
		waitFor(t, pool, "the refusal recorded",
			`select exists (select from queues.error where task_id = $1 and error_message like 'completion refused%')`, id)
	}
	require.Equal(t, "other", q[string](t, pool, `select worker_id from queues.task where task_id = $1`, id), "the newer outcome stands")
	require.True(t, q[bool](t, pool, `select t.status = 'completed' and t.lease_id = (select max(l.task_lease_id) from queues.task_lease l where l.task_id = t.task_id)
		from queues.task t where t.task_id = $1`, id), "completed under its newest lease, not the paused worker's")
}

// SIGTERM with tasks in flight: they finish within the grace period, nothing is lost or run twice.
func TestE2ESigtermLosesNothing(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	w := startWorkerProc(t, url, "TASKORCH_CONCURRENCY=4", "TASKORCH_SHUTDOWN_GRACE=20s")
	var ids []int64
	for range 20 {
		ids = append(ids, enqueue(t, pool, "taskorch.sleep", `{"ms": 300}`, 0))
	}
	waitFor(t, pool, "tasks in flight", `select count(*) >= 2 from queues.task where status = 'running'`)
	w.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, w.wait(t))
	require.Equal(t, int64(0), q[int64](t, pool, `select count(*) from queues.task where status = 'running'`), "nothing stranded")

	startWorkerProc(t, url)
	waitFor(t, pool, "all done", `select count(*) = 20 from queues.task where status = 'completed'`)
	require.Equal(t, 20+q[int64](t, pool, `select count(*) from queues.task_event where event = 'released'`),
		q[int64](t, pool, `select count(*) from queues.task_lease`), "each ran once: every other lease was given back unstarted")
	_ = ids
}

// A worker logged in as a user that holds only worker_service_user, with migrations off, runs
// granted functions, and cannot be used to run anything else.
func TestE2ELeastPrivilegeWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	_, err := pool.Exec(ctx, testfixtures.WorkerSQL)
	require.NoError(t, err)
	role := fmt.Sprintf("tw_e2e_%d", time.Now().UnixNano())
	_, err = pool.Exec(ctx, fmt.Sprintf(`create role %s login password 'pw'; grant worker_service_user to %s`, role, role))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `drop role if exists `+role) })
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	workerURL := fmt.Sprintf("postgres://%s:pw@%s:%d/%s?sslmode=disable", role, cfg.Host, cfg.Port, cfg.Database)

	// A function the owner may run and the worker may not.
	_, err = pool.Exec(ctx, `create function wbiz.owner_only(jsonb) returns jsonb language sql as $$ select '{"status": "succeeded"}'::jsonb $$;
		revoke all on function wbiz.owner_only(jsonb) from public`)
	require.NoError(t, err)
	startWorkerProc(t, workerURL, "TASKORCH_MIGRATE=false")
	ok := enqueue(t, pool, "db_function", `{"db_function": "wbiz.supervisor", "note": "least", "child_type": "taskorch.noop"}`, 0)
	secret := enqueue(t, pool, "db_function", `{"db_function": "wbiz.owner_only"}`, 0)
	waitStatus(t, pool, ok, "completed")
	waitStatus(t, pool, secret, "failed")
	require.True(t, strings.Contains(lastErr(t, pool, secret), "does not exist") || strings.Contains(lastErr(t, pool, secret), "permission denied"),
		lastErr(t, pool, secret))
	require.Equal(t, int64(1), q[int64](t, pool, `select count(*) from wbiz.effect where note = 'least'`))
}

func lastErr(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(context.Background(),
		`select error_message from queues.error where task_id = $1 order by error_id desc limit 1`, id).Scan(&s))
	return s
}

// A second SIGTERM skips the grace period: the worker exits at once and gives its running task
// back to pending, its attempt not spent.
func TestE2ESecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	w := startWorkerProc(t, url, "TASKORCH_SHUTDOWN_GRACE=10m")
	id := enqueue(t, pool, "taskorch.sleep", `{"ms": 600000}`, 0)
	w.waitStarted(t, id)
	w.signal(t, syscall.SIGTERM)
	require.Eventually(t, func() bool { return strings.Contains(w.out.String(), "signal again to stop at once") },
		30*time.Second, 10*time.Millisecond)
	start := time.Now()
	w.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, w.wait(t))
	require.Less(t, time.Since(start), 20*time.Second)
	require.Equal(t, "pending", q[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
	require.Equal(t, 0, q[int](t, pool, `select attempt from queues.task where task_id = $1`, id))
}
