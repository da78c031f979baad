package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

func TestListFiltersAndKeysetPaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	var params []taskorch.EnqueueParams
	for i := range 25 {
		typ := "alpha"
		if i%5 == 0 {
			typ = "beta"
		}
		params = append(params, taskorch.EnqueueParams{Args: raw(typ, `{}`)})
	}
	ids, err := c.EnqueueMany(ctx, params)
	require.NoError(t, err)
	got := claim(t, pool, "w", 3, "5 minutes")
	require.Len(t, got, 3)

	// Page through everything, 10 at a time, newest first.
	var all []int64
	p := &taskorch.ListParams{Limit: 10}
	for {
		page, err := c.List(ctx, p)
		require.NoError(t, err)
		for _, task := range page.Tasks {
			all = append(all, task.ID)
		}
		if page.Next == 0 {
			break
		}
		p.Before = page.Next
	}
	require.Len(t, all, 25)
	for i := 1; i < len(all); i++ {
		require.Greater(t, all[i-1], all[i], "newest first, no repeats")
	}
	require.Equal(t, ids[len(ids)-1].TaskID, all[0])

	beta, err := c.List(ctx, &taskorch.ListParams{Types: []string{"beta"}})
	require.NoError(t, err)
	require.Len(t, beta.Tasks, 5)
	require.Zero(t, beta.Next)

	running, err := c.List(ctx, &taskorch.ListParams{Statuses: []taskorch.Status{taskorch.StatusRunning}})
	require.NoError(t, err)
	require.Len(t, running.Tasks, 3)

	both, err := c.List(ctx, &taskorch.ListParams{Types: []string{"beta"}, Statuses: []taskorch.Status{taskorch.StatusPending, taskorch.StatusRunning}})
	require.NoError(t, err)
	require.Len(t, both.Tasks, 5)

	_, err = c.List(ctx, &taskorch.ListParams{Statuses: []taskorch.Status{"finished"}})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	_, err = c.List(ctx, &taskorch.ListParams{Limit: -1})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	_, err = c.History(ctx, 123456)
	require.ErrorIs(t, err, taskorch.ErrNotFound)
}

// A listing by one SQL function's queue, db_function:<schema.function> (the name queues list
// shows), lists that function's tasks alone; db_function lists every function's, and a type with
// no task lists none.
func TestListAFunctionsQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, `create schema app;
		create function app.f1(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		create function app.f2(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$`)
	ids := map[string][]int64{}
	for _, fn := range []string{"app.f1", "app.f2", "app.f1"} {
		ids[fn] = append(ids[fn], scalar[int64](t, pool, `select queues.enqueue('db_function', jsonb_build_object('db_function', $1::text))`, fn))
	}
	plain, err := c.Enqueue(ctx, raw("plain", `{"db_function": "app.f1"}`), nil) // not a db_function task
	require.NoError(t, err)
	list := func(types ...string) []int64 {
		page, err := c.List(ctx, &taskorch.ListParams{Types: types})
		require.NoError(t, err)
		var got []int64
		for _, task := range page.Tasks {
			got = append(got, task.ID)
		}
		return got
	}
	require.ElementsMatch(t, ids["app.f1"], list("db_function:app.f1"))
	require.ElementsMatch(t, ids["app.f2"], list("db_function:app.f2"))
	require.ElementsMatch(t, append(append([]int64{}, ids["app.f1"]...), ids["app.f2"]...), list("db_function"))
	require.ElementsMatch(t, append([]int64{plain.TaskID}, ids["app.f2"]...), list("plain", "db_function:app.f2"))
	require.Empty(t, list("db_function:app.none"))
}

// A task's history is one timeline from where each fact is written once: the claims from its
// leases, the retry from its event, the completion from its row, the errors from queues.error.
func TestHistoryMergesLeasesEventsAndCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	res, err := c.Enqueue(ctx, raw("merged", `{}`), nil)
	require.NoError(t, err)
	id := res.TaskID

	first := claim(t, pool, "w1", 1, "5 minutes")
	require.Len(t, first, 1)
	mustExec(t, pool, `select queues.fail_task($1, 'boom', $2)`, id, first[0].LeaseID)
	mustExec(t, pool, `update queues.task set run_at = now() where task_id = $1`, id) // due again at once
	second := claim(t, pool, "w2", 1, "5 minutes")
	require.Len(t, second, 1)
	mustExec(t, pool, `select queues.complete_task($1, $2)`, id, second[0].LeaseID)
	// An error row whose context does not hold a lease id as the writers put it: shown, without one.
	mustExec(t, pool, `insert into queues.error (task_id, error_message, context) values ($1, 'odd', '{"lease_id": "not a number"}')`, id)

	h, err := c.History(ctx, id)
	require.NoError(t, err)
	var events, sources []string
	for _, e := range h.Events {
		events, sources = append(events, e.Event), append(sources, e.Source)
		require.Equal(t, e.Source == "event", e.ID != nil, "only a stored event has an event id")
	}
	require.Equal(t, []string{"claimed", "retry_scheduled", "claimed", "completed"}, events)
	require.Equal(t, []string{"lease", "event", "lease", "task"}, sources)
	require.Equal(t, first[0].LeaseID, *h.Events[0].LeaseID)
	require.Equal(t, "w2", *h.Events[3].WorkerID)
	require.Equal(t, second[0].LeaseID, *h.Events[3].LeaseID, "completed under the second lease")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task_event where task_id = $1 and event in ('claimed', 'completed')`, id),
		"claims and completions are not written as events")

	// The errors are in the view too, the failure's with its lease.
	require.Equal(t, []string{"boom", "odd"}, scalar[[]string](t, pool,
		`select array_agg(detail order by occurred_at, step, source_id) from queues.task_history where task_id = $1 and source = 'error'`, id))
	require.Equal(t, first[0].LeaseID, scalar[int64](t, pool,
		`select lease_id from queues.task_history where task_id = $1 and source = 'error' and detail = 'boom'`, id))
}
