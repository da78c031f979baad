package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// flakySQL is a db_function that fails until app.switch says the downstream is back.
const flakySQL = `
create schema app;
create table app.switch (ok boolean not null);
insert into app.switch values (false);
create function app.flaky(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if not (select s.ok from app.switch s) then
        raise exception 'downstream is down';
    end if;
    return jsonb_build_object('status', 'succeeded');
end $$;
revoke all on function app.flaky(jsonb) from public;
grant usage on schema app to worker_service_user;
grant execute on function app.flaky(jsonb) to worker_service_user;
`

// The runbook's "retry everything that died in the last hour", against a real worker process:
// tasks die while their downstream is down; once it is back, a dry run counts them, one command
// retries them all (in batches of 4), recorded with the actor, and the worker completes them.
// Tasks that died earlier, or of another type, stay dead.
func TestE2ERetryEverythingThatDied(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	_, err := pool.Exec(t.Context(), flakySQL)
	require.NoError(t, err)
	db := []string{"--database-url", url}
	startWorkerProc(t, url, "TASKORCH_CONCURRENCY=4")

	var ids []int64
	for range 10 {
		ids = append(ids, enqueue(t, pool, "db_function", `{"db_function": "app.flaky"}`, 1))
	}
	old := enqueue(t, pool, "taskorch.fail", `{}`, 1)
	waitFor(t, pool, "every task dead", `select count(*) = 11 from queues.task where status = 'dead'`)
	// One died two hours ago: outside "the last hour".
	_, err = pool.Exec(t.Context(), `update queues.task set dead_at = now() - interval '2 hours' where task_id = $1`, ids[9])
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `update app.switch set ok = true`)
	require.NoError(t, err)

	r := run(t, append([]string{"tasks", "retry", "--status", "dead", "--type", "db_function", "--since", "1h", "--dry-run"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "would retry 9 tasks (dry run: nothing changed)\n", r.out)
	require.Zero(t, q[int64](t, pool, `select count(*) from queues.task where status <> 'dead'`), "a dry run changes nothing")

	r = run(t, append([]string{"tasks", "retry", "--status", "dead", "--type", "db_function", "--since", "1h",
		"--batch", "4", "--actor", "ann", "--json"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	var out struct {
		Result struct {
			Done, Skipped int64
			Batches       int
			Complete      bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &out), r.out)
	require.Equal(t, int64(9), out.Result.Done)
	require.Zero(t, out.Result.Skipped)
	require.Equal(t, 3, out.Result.Batches, "9 tasks, 4 a batch")
	require.True(t, out.Result.Complete)

	waitFor(t, pool, "the retried tasks completed", `select count(*) = 9 from queues.task where task_id = any ($1) and status = 'completed'`, ids[:9])
	require.Equal(t, "dead", q[string](t, pool, `select status::text from queues.task where task_id = $1`, ids[9]), "died two hours ago")
	require.Equal(t, "dead", q[string](t, pool, `select status::text from queues.task where task_id = $1`, old), "another type")
	require.Equal(t, int64(9), q[int64](t, pool, `select count(*) from queues.task_event where event = 'retried' and actor = 'ann'`))

	// tasks show names who retried it.
	r = run(t, append([]string{"tasks", "show", strconv.FormatInt(ids[0], 10)}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^\s+\S+\s+retried\s+dead\s+pending\s+-\s+\S+\s+ann\s+retried by hand after 1 attempt\(s\)$`, r.out)
	shown := runJSON[struct {
		History struct{ Events []map[string]any }
	}](t, append([]string{"tasks", "show", strconv.FormatInt(ids[0], 10)}, db...)...)
	var actors []any
	for _, e := range shown.History.Events {
		if e["event"] == "retried" {
			actors = append(actors, e["actor"])
		}
	}
	require.Equal(t, []any{"ann"}, actors)
}

// Several ids at once: each is acted on or refused on its own, and the exit code is the first
// refusal's; a filter and ids together, no filter, a bad time or a status the action does not
// take are usage errors that change nothing.
func TestTasksActionsByIDsAndFilterErrors(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	db := []string{"--database-url", url}
	a := enqueue(t, pool, "report", `{}`, 0)
	b := enqueue(t, pool, "report", `{}`, 0)
	ids := []string{strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)}

	r := run(t, append(append([]string{"tasks", "cancel"}, ids...), append(db, "--reason", "duplicate", "--actor", "bob")...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "task "+ids[0]+" is cancelled\ntask "+ids[1]+" is cancelled\n", r.out)
	require.Equal(t, int64(2), q[int64](t, pool, `select count(*) from queues.task_event where event = 'cancelled' and actor = 'bob' and detail = 'duplicate'`))

	r = run(t, append([]string{"tasks", "delete", ids[0], "999999"}, db...)...)
	require.Equal(t, exitNotFound, r.code)
	require.Equal(t, "task "+ids[0]+" is deleted\n", r.out)
	require.Contains(t, r.err, "task 999999 does not exist")

	c := enqueue(t, pool, "report", `{}`, 0)
	r = run(t, append([]string{"tasks", "delete", strconv.FormatInt(c, 10)}, db...)...)
	require.Equal(t, exitState, r.code)
	require.Contains(t, r.err, "is pending; only finished tasks are deleted (cancel it first)")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "retry", ids[1], "--status", "dead"}, "give task ids or a filter"},
		{[]string{"tasks", "retry"}, "give task ids, or a filter"},
		{[]string{"tasks", "retry", ids[1], "--dry-run"}, "--dry-run and --batch go with a filter"},
		{[]string{"tasks", "retry", "--status", "dead", "--since", "yesterday"}, `--since "yesterday": not a duration ago`},
		{[]string{"tasks", "retry", "--status", "running"}, "retry acts on dead, failed, cancelled tasks, not running"},
		{[]string{"tasks", "cancel", "--status", "pending", "--since", "1h"}, "pending tasks have no finish time"},
		{[]string{"tasks", "delete", "--status", "finished"}, `unknown status "finished"`},
		{[]string{"tasks", "delete", "--type", "report", "--batch", "0"}, "--batch must be between 1 and 1000"},
		{[]string{"tasks", "retry", "--type", "report", "--actor", strings.Repeat("x", 201)}, "_actor must be at most 200 characters"},
		{[]string{"tasks", "list", "--longest", "--status", "dead"}, "--longest lists running tasks"},
	} {
		r := run(t, append(tc.args, db...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.err)
		require.Contains(t, r.err, tc.want, tc.args)
	}
	require.Equal(t, "cancelled", q[string](t, pool, `select status::text from queues.task where task_id = $1`, b), "nothing changed")
}

// The runbook's "find a stuck task": tasks list --longest shows the running tasks of a real
// worker, the longest-running first, with its worker, attempt, claim time and lease expiry; a
// cancel by filter stops them.
func TestE2ERunningLongest(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	db := []string{"--database-url", url}
	startWorkerProc(t, url, "TASKORCH_WORKER_ID=slow-worker", "TASKORCH_CONCURRENCY=4")
	first := enqueue(t, pool, "taskorch.sleep", `{"ms": 600000}`, 0)
	waitStatus(t, pool, first, "running")
	second := enqueue(t, pool, "taskorch.sleep", `{"ms": 600000}`, 0)
	waitStatus(t, pool, second, "running")

	r := run(t, append([]string{"tasks", "list", "--longest"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	require.Len(t, lines, 3, r.out)
	require.Regexp(t, `^ID\s+TYPE\s+WORKER\s+ATTEMPT\s+CLAIMED AT\s+RUNNING FOR\s+LEASE EXPIRES$`, lines[0])
	require.Regexp(t, `^`+strconv.FormatInt(first, 10)+`\s+taskorch.sleep\s+slow-worker\s+1/25\s+\d{4}-\d\d-\d\dT\S+Z\s+\S+\s+\d{4}-`, lines[1], "the oldest first")
	require.Regexp(t, `^`+strconv.FormatInt(second, 10)+`\s+taskorch.sleep\s+slow-worker\s+1/25\s+`, lines[2])

	r = run(t, append([]string{"tasks", "cancel", "--status", "running", "--type", "taskorch.sleep", "--actor", "ops"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "cancelled 2 tasks\n", r.out)
	waitFor(t, pool, "the worker let go of them", `select not exists (select from queues.task where status = 'running')`)
	r = run(t, append([]string{"tasks", "list", "--longest", "--json"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.JSONEq(t, `{"running": []}`, r.out)
}

// Steering a schedule from the CLI: pause, run now, resume, backfill (dry run, then for real),
// each recorded with the actor; a schedule that does not exist is exit code 3.
func TestSchedulesSteer(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	db := []string{"--database-url", url}
	require.Equal(t, 0, run(t, append([]string{"schedules", "add", "hourly", "0 * * * *", "report"}, db...)...).code)

	r := run(t, append([]string{"schedules", "pause", "hourly", "--actor", "ann"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "paused schedule hourly\n", r.out)
	r = run(t, append([]string{"schedules", "run", "hourly", "--actor", "ann"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `^enqueued task \d+ of schedule hourly\n$`, r.out)
	r = run(t, append([]string{"schedules", "resume", "hourly", "--actor", "bob"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "resumed schedule hourly\n", r.out)

	r = run(t, append([]string{"schedules", "backfill", "hourly", "--from", "3h", "--dry-run"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `^would backfill 3 ticks of schedule hourly \(dry run: nothing enqueued\)\n(  \S+:00:00Z\n){3}$`, r.out)
	r = run(t, append([]string{"schedules", "backfill", "hourly", "--from", "3h", "--actor", "carl"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "backfilled schedule hourly: 3 ticks in the window, 3 enqueued, 0 enqueued already\n", r.out)
	r = run(t, append([]string{"schedules", "backfill", "hourly", "--from", "3h"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, "0 enqueued, 3 enqueued already")

	require.Equal(t, "paused ann,run_now ann,resumed bob,backfilled carl,backfilled "+resolveActor(""), q[string](t, pool,
		`select string_agg(event || ' ' || actor, ',' order by schedule_event_id) from queues.schedule_event`))
	require.Equal(t, int64(4), q[int64](t, pool, `select count(*) from queues.task where idempotency_key like 'schedule:hourly:%'`), "a run and 3 ticks")

	r = run(t, append([]string{"schedules", "pause", "nope"}, db...)...)
	require.Equal(t, exitNotFound, r.code)
	require.Contains(t, r.err, "schedule 'nope' does not exist")
	r = run(t, append([]string{"schedules", "backfill", "hourly"}, db...)...)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "backfill needs --from")
	r = run(t, append([]string{"schedules", "backfill", "hourly", "--from", "1h", "--to", "2030-01-01"}, db...)...)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "the window ends in the future")
}

// Quieting a worker from the CLI: workers quiet and resume, recorded with the actor; workers list
// says which is quiet, since when and by whom; a worker that is not registered is exit code 3.
// (What the worker does when quiet: TestQuietWorkerFinishesAndClaimsNothing.)
func TestWorkersQuiet(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	db := []string{"--database-url", url}
	_, err := pool.Exec(t.Context(), `select * from queues.register_worker_instance('w1', 'p1', 'host-a', 7, 4, 'v', 'postgres', null, false, interval '30 seconds')`)
	require.NoError(t, err)

	r := run(t, append([]string{"workers", "quiet", "w1", "--actor", "ann"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "quieted worker w1: it finishes its running tasks and claims nothing more from its next heartbeat\n", r.out)
	r = run(t, append([]string{"workers", "quiet", "w1"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "worker w1 was quiet already\n", r.out)
	r = run(t, append([]string{"workers", "list"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^w1 +host-a +quiet since \S+Z \(ann\) `, r.out)
	ws := runJSON[[]map[string]any](t, append([]string{"workers", "list"}, db...)...)
	require.Len(t, ws, 1)
	require.Equal(t, "ann", ws[0]["quiet_by"])
	require.NotEmpty(t, ws[0]["quiet_since"])

	r = run(t, append([]string{"workers", "resume", "w1", "--actor", "bob", "--json"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.JSONEq(t, `{"worker_id": "w1", "changed": true}`, r.out)
	r = run(t, append([]string{"workers", "resume", "w1"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "worker w1 was not quiet\n", r.out)
	require.Equal(t, "quieted ann,resumed bob", q[string](t, pool,
		`select string_agg(event || ' ' || actor, ',' order by worker_event_id) from queues.worker_event`))

	r = run(t, append([]string{"workers", "quiet", "nope"}, db...)...)
	require.Equal(t, exitNotFound, r.code)
	require.Contains(t, r.err, "worker 'nope' is not registered")
	r = run(t, append([]string{"workers", "quiet"}, db...)...)
	require.Equal(t, exitUsage, r.code)
}
