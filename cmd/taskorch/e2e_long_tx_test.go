package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// longTxSQL is a business schema whose functions hold their transaction open: lt.slow for a
// while, lt.hang until it is cancelled. Each writes an effect first.
const longTxSQL = `
create schema lt;
create table lt.effect (effect_id bigint generated always as identity primary key, note text not null);
create function lt.slow(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into lt.effect (note) values ('slow');
    perform pg_sleep((_p ->> 'seconds')::float8);
    return jsonb_build_object('status', 'succeeded');
end $$;
create function lt.hang(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into lt.effect (note) values ('hang');
    perform pg_sleep(600);
    return jsonb_build_object('status', 'succeeded');
end $$;
revoke all on function lt.slow(jsonb), lt.hang(jsonb) from public;
grant usage on schema lt to worker_service_user;
grant execute on function lt.slow(jsonb), lt.hang(jsonb) to worker_service_user;
`

// A db_function whose transaction outlives several leases runs beside Go tasks that do too, on
// one `taskorch worker` with a 1-second lease: the function's transaction holds no lock that the
// worker's lease renewal waits for (docs/design.md, "Which statement locks what"), so every task
// keeps its lease and is claimed exactly once, and the function's work commits once. Before,
// renewal waited for the function's commit and the Go tasks beside it ran again and again.
func TestE2ELongDBFunctionBesideLongTasks(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	_, err := pool.Exec(t.Context(), longTxSQL)
	require.NoError(t, err)
	startWorkerProc(t, url, "TASKORCH_CONCURRENCY=4", "TASKORCH_LEASE_DURATION=1s")

	fn := enqueue(t, pool, "db_function", `{"db_function": "lt.slow", "seconds": 5}`, 0)
	sleeps := []int64{
		enqueue(t, pool, "taskorch.sleep", `{"ms": 4000}`, 0),
		enqueue(t, pool, "taskorch.sleep", `{"ms": 4000}`, 0),
	}
	for _, id := range append([]int64{fn}, sleeps...) {
		waitStatus(t, pool, id, "completed")
		require.Equal(t, int64(1), q[int64](t, pool, `select count(*) from queues.task_lease where task_id = $1`, id),
			"task %d was claimed once", id)
		require.Equal(t, int64(0), q[int64](t, pool,
			`select count(*) from queues.task_event where task_id = $1 and event = 'lease_expired'`, id),
			"task %d never lost its lease", id)
	}
	require.Equal(t, int64(1), q[int64](t, pool, `select count(*) from lt.effect`), "the function's work committed once")
	// Its completion is stamped when it happened, not when its transaction began.
	require.True(t, q[bool](t, pool, `select completed_at - claimed_at >= interval '5 seconds' from queues.task where task_id = $1`, fn),
		"completed_at is the time of the completion")
}

// `taskorch tasks cancel` of a running db_function cancels its statement in the database: the
// command does not wait for the function, the backend stops running it within a second, its
// work is rolled back, and the task stays cancelled (docs/worker.md, "Cancellation").
func TestE2ECancelRunningDBFunction(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	_, err := pool.Exec(t.Context(), longTxSQL)
	require.NoError(t, err)
	w := startWorkerProc(t, url, "TASKORCH_CONCURRENCY=2")

	id := enqueue(t, pool, "db_function", `{"db_function": "lt.hang"}`, 0)
	running := `select exists (select from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and query like '%internal.run_function%')`
	waitFor(t, pool, "the function runs", running)
	stopped := w.out.lineWith(`"msg":"task stopped without an outcome"`, fmt.Sprintf(`"task_id":%d,`, id))

	began := time.Now()
	r := runBinary(t, []string{"DATABASE_URL=" + url}, "tasks", "cancel", strconv.FormatInt(id, 10))
	returned := time.Now()
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, fmt.Sprintf("task %d is cancelled\n", id), r.out)
	t.Logf("tasks cancel returned after %s", returned.Sub(began))
	for q[bool](t, pool, running) {
		require.Less(t, time.Since(returned), time.Second, "the function's statement is cancelled within a second")
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the function stopped %s after the cancel command returned", time.Since(returned))
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not log the stopped task")
	}
	require.Equal(t, "cancelled", q[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
	require.Equal(t, int64(0), q[int64](t, pool, `select count(*) from lt.effect`), "the function's work was rolled back")
	// The slot is free: the next task runs.
	waitStatus(t, pool, enqueue(t, pool, "taskorch.noop", `{}`, 0), "completed")
}
