package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A retry by filter acts on every matching task, batch after batch, and on nothing else; each
// task's event names the actor. A dry run counts the same tasks.
func TestActOnMatchingInBatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	var recent []int64
	for range 23 {
		recent = append(recent, seedTask(t, pool, "email", "dead", 10*time.Minute))
	}
	old := seedTask(t, pool, "email", "dead", 3*time.Hour)        // died before the window
	other := seedTask(t, pool, "sms", "dead", time.Minute)        // another type
	failed := seedTask(t, pool, "email", "failed", time.Minute)   // another status
	running := seedTask(t, pool, "email", "running", time.Minute) // not retriable

	f := TaskFilter{Statuses: []string{"dead"}, Types: []string{"email"}, FinishedSince: time.Now().Add(-time.Hour)}
	n, err := CountMatching(ctx, pool, ActionRetry, f)
	require.NoError(t, err)
	require.Equal(t, int64(23), n)

	var seen []BulkResult
	res, err := ActOnMatching(ctx, pool, ActionRetry, f, "ann", "", 5, func(r BulkResult) { seen = append(seen, r) })
	require.NoError(t, err)
	require.True(t, res.Complete)
	require.Equal(t, int64(23), res.Done)
	require.Equal(t, int64(23), res.Matched)
	require.Zero(t, res.Skipped)
	require.Len(t, seen, res.Batches, "progress after each batch")
	require.Equal(t, 5, res.Batches, "23 tasks, 5 a batch")
	for _, id := range recent {
		require.Equal(t, "pending", taskStatus(t, pool, id))
	}
	require.Equal(t, int64(23), count(t, pool, `select count(*) from queues.task_event
		where event = 'retried' and actor = 'ann' and from_status = 'dead' and to_status = 'pending' and task_id = any ($1)`, recent))
	require.Equal(t, int64(23), count(t, pool, `select count(*) from queues.task where task_id = any ($1) and attempt = 0 and run_at <= now()`, recent),
		"attempts reset, due now")
	require.Equal(t, "dead", taskStatus(t, pool, old))
	require.Equal(t, "dead", taskStatus(t, pool, other))
	require.Equal(t, "failed", taskStatus(t, pool, failed))
	require.Equal(t, "running", taskStatus(t, pool, running))

	// Again: nothing matches any more.
	res, err = ActOnMatching(ctx, pool, ActionRetry, f, "ann", "", 5, nil)
	require.NoError(t, err)
	require.Zero(t, res.Done)
	require.True(t, res.Complete)

	// Cancel by type and status (pending), with a reason; then delete the cancelled ones,
	// which removes them, and leaves a deleted event naming who.
	res, err = ActOnMatching(ctx, pool, ActionCancel, TaskFilter{Statuses: []string{"pending"}, Types: []string{"email"}}, "bob", "superseded", 0, nil)
	require.NoError(t, err)
	require.Equal(t, int64(23), res.Done)
	require.Equal(t, int64(23), count(t, pool, `select count(*) from queues.task_event
		where event = 'cancelled' and actor = 'bob' and detail = 'superseded' and task_id = any ($1)`, recent))
	res, err = ActOnMatching(ctx, pool, ActionDelete, TaskFilter{Statuses: []string{"cancelled"}}, "carl", "", 0, nil)
	require.NoError(t, err)
	require.Equal(t, int64(23), res.Done)
	require.Zero(t, count(t, pool, `select count(*) from queues.task where task_id = any ($1)`, recent))
	require.Equal(t, int64(23), count(t, pool, `select count(*) from queues.task_event where event = 'deleted' and actor = 'carl' and task_id = any ($1)`, recent))
}

// A bulk action never waits for a lock: a task whose row another transaction holds (a completion
// committing, an operator's statement) is skipped and counted, while the others are acted on; a
// db_function's FOR KEY SHARE lock keeps a retry or cancel from nothing, and a delete skips it.
func TestBulkActionsNeverWaitForALock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	a := seedTask(t, pool, "job", "dead", time.Minute)
	b := seedTask(t, pool, "job", "dead", time.Minute)
	c := seedTask(t, pool, "job", "dead", time.Minute)

	hold := func(id int64, mode string) func() {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `select 1 from queues.task where task_id = $1 for `+mode, id)
		require.NoError(t, err)
		return func() { require.NoError(t, tx.Rollback(context.WithoutCancel(ctx))) }
	}
	releaseA := hold(a, "no key update") // as a completion or another operator's statement holds it
	releaseB := hold(b, "key share")     // as a db_function's transaction holds its own task

	// Had it waited, the statement would block until the deadline: it must return at once.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := ActOnMatching(wctx, pool, ActionRetry, TaskFilter{Types: []string{"job"}}, "ann", "", 0, nil)
	require.NoError(t, err)
	require.Equal(t, int64(3), res.Matched)
	require.Equal(t, int64(2), res.Done, "b (FOR KEY SHARE) and c")
	require.Equal(t, int64(1), res.Skipped, "a, held")
	require.Equal(t, "dead", taskStatus(t, pool, a))
	require.Equal(t, "pending", taskStatus(t, pool, b))
	require.Equal(t, "pending", taskStatus(t, pool, c))

	// By id: the held task is busy (the SQL function's answer, without the client's retries).
	var outcome string
	require.NoError(t, pool.QueryRow(wctx, `select outcome from queues.retry_tasks(array[$1::bigint])`, a).Scan(&outcome))
	require.Equal(t, OutcomeBusy, outcome)
	releaseA()
	outs, err := ActOnTaskIDs(wctx, pool, ActionRetry, []int64{a}, "ann", "")
	require.NoError(t, err)
	require.Equal(t, OutcomeDone, outs[0].Outcome)

	// Delete needs FOR UPDATE, which a FOR KEY SHARE holder blocks: skipped, not waited for.
	for _, id := range []int64{a, b, c} {
		_, err := pool.Exec(ctx, `update queues.task set status = 'dead', dead_at = now() where task_id = $1`, id)
		require.NoError(t, err)
	}
	releaseB()
	releaseB = hold(b, "key share")
	defer releaseB()
	res, err = ActOnMatching(wctx, pool, ActionDelete, TaskFilter{Types: []string{"job"}}, "ann", "", 0, nil)
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Done)
	require.Equal(t, int64(1), res.Skipped)
	require.Equal(t, "dead", taskStatus(t, pool, b), "b stays: its holder's transaction is not waited for")
}

// Bad filters and arguments are refused with ErrInvalidInput, saying what is wrong; nothing is
// changed.
func TestBadTaskFilterRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	id := seedTask(t, pool, "job", "dead", time.Minute)
	now := time.Now()
	for _, tc := range []struct {
		action TaskAction
		f      TaskFilter
		batch  int
		actor  string
		want   string
	}{
		{ActionRetry, TaskFilter{}, 0, "", "give at least one condition"},
		{ActionRetry, TaskFilter{Statuses: []string{"running"}}, 0, "", "retry acts on dead, failed, cancelled tasks, not running"},
		{ActionDelete, TaskFilter{Statuses: []string{"pending"}}, 0, "", "delete acts on completed, failed, dead, cancelled tasks, not pending"},
		{ActionRetry, TaskFilter{Statuses: []string{"finished"}}, 0, "", `invalid input value for enum queues.task_status: "finished"`},
		{ActionCancel, TaskFilter{Statuses: []string{"pending"}, FinishedSince: now}, 0, "", "pending tasks have no finish time"},
		{ActionRetry, TaskFilter{Types: []string{"bad type"}}, 0, "", "_task_types: 'bad type' is not a task type"},
		{ActionRetry, TaskFilter{Types: []string{"job"}, FinishedSince: now, FinishedUntil: now.Add(-time.Hour)}, 0, "", "_finished_since"},
		{ActionRetry, TaskFilter{Types: []string{"job"}, EnqueuedSince: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, 0, "", "_enqueued_since must be a finite time"},
		{ActionRetry, TaskFilter{Types: []string{"job"}}, 1001, "", "_batch must be between 1 and 1000"},
		{ActionRetry, TaskFilter{Types: []string{"job"}}, 0, "a\nb", "_actor must be at most 200 characters without control characters"},
		{"restart", TaskFilter{Types: []string{"job"}}, 0, "", `unknown action "restart"`},
	} {
		_, err := ActOnMatching(ctx, pool, tc.action, tc.f, tc.actor, "", tc.batch, nil)
		require.ErrorIs(t, err, ErrInvalidInput, "%+v", tc)
		require.ErrorContains(t, err, tc.want)
	}
	for _, ids := range [][]int64{nil, {0}, {-4}} {
		_, err := ActOnTaskIDs(ctx, pool, ActionRetry, ids, "", "")
		require.ErrorIs(t, err, ErrInvalidInput, "%v", ids)
	}
	_, err := ActOnTaskIDs(ctx, pool, ActionRetry, []int64{id}, strings.Repeat("x", 300), "")
	require.ErrorIs(t, err, ErrInvalidInput, "an actor of 300 characters")
	require.Equal(t, "dead", taskStatus(t, pool, id), "nothing changed")
	require.Zero(t, count(t, pool, `select count(*) from queues.task_event`))
}

// One SQL function's queue, db_function:<schema.function> (the name queues list shows), filters
// the bulk actions, their dry run and the running list to that function's tasks; db_function
// itself still takes every function's.
func TestActOnMatchingAFunctionsQueue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(ctx, `create schema app;
		create function app.f1(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		create function app.f2(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$`)
	require.NoError(t, err)
	enqueue := func(fn, status string) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('db_function', jsonb_build_object('db_function', $1::text))`, fn).Scan(&id))
		switch status {
		case "dead":
			_, err = pool.Exec(ctx, `update queues.task set status = 'dead', attempt = 1, dead_at = now(), last_error = 'boom' where task_id = $1`, id)
		case "running":
			_, err = pool.Exec(ctx, `update queues.task set status = 'running', attempt = 1, lease_id = 1, worker_id = 'w',
				claimed_at = now(), lease_expires_at = now() + interval '5 minutes' where task_id = $1`, id)
		}
		require.NoError(t, err)
		return id
	}
	dead1 := []int64{enqueue("app.f1", "dead"), enqueue("app.f1", "dead")}
	dead2 := enqueue("app.f2", "dead")
	running1, running2 := enqueue("app.f1", "running"), enqueue("app.f2", "running")

	f := TaskFilter{Statuses: []string{"dead"}, Types: []string{"db_function:app.f1"}}
	n, err := CountMatching(ctx, pool, ActionRetry, f)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	n, err = CountMatching(ctx, pool, ActionRetry, TaskFilter{Statuses: []string{"dead"}, Types: []string{"db_function"}})
	require.NoError(t, err)
	require.Equal(t, int64(3), n, "db_function takes every function's")

	res, err := ActOnMatching(ctx, pool, ActionRetry, f, "ann", "", 0, nil)
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Done)
	for _, id := range dead1 {
		require.Equal(t, "pending", taskStatus(t, pool, id))
	}
	require.Equal(t, "dead", taskStatus(t, pool, dead2), "another function's task is left alone")

	running, err := RunningLongest(ctx, pool, 10, []string{"db_function:app.f2"})
	require.NoError(t, err)
	require.Len(t, running, 1)
	require.Equal(t, running2, running[0].ID)
	running, err = RunningLongest(ctx, pool, 10, []string{"db_function"})
	require.NoError(t, err)
	require.Len(t, running, 2)
	require.ElementsMatch(t, []int64{running1, running2}, []int64{running[0].ID, running[1].ID})
}
