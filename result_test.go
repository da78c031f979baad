package taskorch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

type Thumbnail struct {
	Image string `json:"image"`
}

func (Thumbnail) TaskType() string { return "thumbnail" }

type thumbResult struct {
	URL   string `json:"url"`
	Bytes int    `json:"bytes"`
}

// A Go handler's result (SetResult, or AddHandlerWithResult's return value) and a db_function
// envelope's payload are stored with the completion, and Get and Wait return them; a task
// without one has none.
func TestTaskResults(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	mustExec(t, pool, `create function public.make_answer(_p jsonb) returns jsonb language sql as
		$$ select jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('answer', (_p->>'n')::int * 2)) $$`)
	mustExec(t, pool, `grant execute on function public.make_answer(jsonb) to worker_service_user`)
	mustExec(t, pool, `create function public.no_payload(_p jsonb) returns jsonb language sql as $$ select '{"success": true}'::jsonb $$`)
	mustExec(t, pool, `grant execute on function public.no_payload(jsonb) to worker_service_user`)

	hs := taskorch.NewHandlers()
	taskorch.AddHandlerWithResult(hs, func(_ context.Context, tk *taskorch.TaskFor[Thumbnail]) (thumbResult, error) {
		return thumbResult{URL: "s3://thumbs/" + tk.Args.Image, Bytes: 512}, nil
	})
	hs.HandleFunc("set_twice", func(ctx context.Context, _ *taskorch.Task) error {
		require.NoError(t, taskorch.SetResult(ctx, map[string]int{"first": 1}))
		return taskorch.SetResult(ctx, []string{"second", "<b>&</b>"}) // the last one stands
	})
	hs.HandleFunc("raw_result", func(ctx context.Context, _ *taskorch.Task) error {
		return taskorch.SetResult(ctx, json.RawMessage(`{"a": [1, 2,  3]}`))
	})
	hs.HandleFunc("cleared", func(ctx context.Context, _ *taskorch.Task) error {
		require.NoError(t, taskorch.SetResult(ctx, "x"))
		return taskorch.SetResult(ctx, nil)
	})
	hs.HandleFunc("none", func(context.Context, *taskorch.Task) error { return nil })
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 4})

	cases := []struct {
		args taskorch.TaskArgs
		want string // "" for no result
	}{
		{Thumbnail{Image: "cat.png"}, `{"url": "s3://thumbs/cat.png", "bytes": 512}`},
		{raw("set_twice", `{}`), `["second", "<b>&</b>"]`},
		{raw("raw_result", `{}`), `{"a": [1, 2, 3]}`},
		{raw("cleared", `{}`), ""},
		{raw("none", `{}`), ""},
		{raw("db_function", `{"db_function": "public.make_answer", "n": 21}`), `{"answer": 42}`},
		{raw("db_function", `{"db_function": "public.no_payload"}`), ""},
	}
	for _, tc := range cases {
		res, err := c.Enqueue(ctx, tc.args, nil)
		require.NoError(t, err)
		done, err := c.Wait(ctx, res.TaskID)
		require.NoError(t, err)
		require.Equal(t, taskorch.StatusCompleted, done.Status, tc.args.TaskType())
		got, err := c.Get(ctx, res.TaskID)
		require.NoError(t, err)
		if tc.want == "" {
			require.Nil(t, done.Result, tc.args.TaskType())
			require.Nil(t, got.Result, tc.args.TaskType())
			require.True(t, scalar[bool](t, pool, `select result is null from queues.task where task_id = $1`, res.TaskID))
			continue
		}
		require.JSONEq(t, tc.want, string(done.Result), tc.args.TaskType())
		require.JSONEq(t, tc.want, string(got.Result), tc.args.TaskType())
		require.Equal(t, tc.want, scalar[string](t, pool, `select result::text from queues.task where task_id = $1`, res.TaskID))
	}

	// Listings leave results out; the task's JSON carries it.
	list, err := c.List(ctx, &taskorch.ListParams{Types: []string{"thumbnail"}})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
	require.Nil(t, list.Tasks[0].Result)
	full, err := c.Get(ctx, list.Tasks[0].ID)
	require.NoError(t, err)
	b, err := json.Marshal(full)
	require.NoError(t, err)
	require.Contains(t, string(b), `"result":{"url":"s3://thumbs/cat.png","bytes":512}`)
}

// The result is written by the completion's own statement: a completion in a transaction that
// rolls back leaves neither; a refused completion (a stale lease) writes no result; a repeat
// under the completing lease keeps the first result; and tasks of one batch keep their own.
func TestResultCommitsWithCompletion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := newClient(t)
	mustExec(t, pool, `select queues.enqueue_many(array['r', 'r', 'r'], array['{}', '{}', '{}']::jsonb[])`)
	cl := claim(t, pool, "w1", 3, "5 minutes")
	require.Len(t, cl, 3)
	ids := []int64{cl[0].TaskID, cl[1].TaskID, cl[2].TaskID}
	leases := []int64{cl[0].LeaseID, cl[1].LeaseID, cl[2].LeaseID}

	// Rolled back: neither the completion nor the result.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	mustExec(t, tx, `select * from queues.complete_tasks_with_results($1, $2, array['{"x": 1}', null, '[2]']::jsonb[])`, ids, leases)
	require.Equal(t, 3, scalar[int](t, tx, `select count(*)::int from queues.task where status = 'completed' and task_id = any($1)`, ids))
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, 3, scalar[int](t, pool, `select count(*)::int from queues.task where status = 'running' and result is null`))

	// A stale lease for the first task: refused, nothing written; the others complete with
	// their own results.
	rows, err := pool.Query(ctx, `select task_id, status from queues.complete_tasks_with_results($1, $2, array['{"x": 1}', null, '[2]']::jsonb[])`,
		ids, []int64{leases[0] + 1000, leases[1], leases[2]})
	require.NoError(t, err)
	got := map[int64]string{}
	for rows.Next() {
		var id int64
		var s string
		require.NoError(t, rows.Scan(&id, &s))
		got[id] = s
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[int64]string{ids[1]: "completed", ids[2]: "completed"}, got)
	require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, ids[0]))
	require.True(t, scalar[bool](t, pool, `select result is null from queues.task where task_id = $1`, ids[0]))
	require.Contains(t, lastError(t, pool, ids[0]), "completion refused")
	require.True(t, scalar[bool](t, pool, `select result is null from queues.task where task_id = $1`, ids[1]))
	require.Equal(t, `[2]`, scalar[string](t, pool, `select result::text from queues.task where task_id = $1`, ids[2]))

	// A repeat under the completing lease counts as done and keeps the first result.
	require.Equal(t, "completed", scalar[string](t, pool,
		`select status from queues.complete_tasks_with_results(array[$1::bigint], array[$2::bigint], array['"other"'::jsonb])`, ids[2], leases[2]))
	require.Equal(t, `[2]`, scalar[string](t, pool, `select result::text from queues.task where task_id = $1`, ids[2]))

	// The completer's encoding: a nil element of a []json.RawMessage is SQL NULL, not JSON null.
	mustExec(t, pool, `select queues.enqueue_many(array['r', 'r'], array['{}', '{}']::jsonb[])`)
	more := claim(t, pool, "w1", 2, "5 minutes")
	require.Len(t, more, 2)
	mustExec(t, pool, `select * from queues.complete_tasks_with_results($1, $2, $3)`,
		[]int64{more[0].TaskID, more[1].TaskID}, []int64{more[0].LeaseID, more[1].LeaseID}, []json.RawMessage{nil, json.RawMessage(`{"k": 1}`)})
	require.True(t, scalar[bool](t, pool, `select result is null from queues.task where task_id = $1 and status = 'completed'`, more[0].TaskID))
	require.Equal(t, `{"k": 1}`, scalar[string](t, pool, `select result::text from queues.task where task_id = $1`, more[1].TaskID))

	// Bad arguments: a clear error, nothing written.
	_, err = pool.Exec(ctx, `select * from queues.complete_tasks_with_results($1, $2, array[null]::jsonb[])`, ids[:1], leases[:1])
	require.NoError(t, err, "one result per task")
	_, err = pool.Exec(ctx, `select * from queues.complete_tasks_with_results($1, $2, array[null, null]::jsonb[])`, ids[:1], leases[:1])
	require.ErrorContains(t, err, "complete_tasks_with_results: 1 task ids, 1 lease ids and 2 results; expected one of each per task")
	require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrInvalidInput)
}

// A result over the bound fails the task, without retry, with a message naming the sizes; no
// part of it is stored. The worker's bound (MaxResultBytes) holds for Go handlers, typed
// handlers and db_function envelopes (whose work is then rolled back); without it the
// database's 8 MiB bound holds, in the batch's statement, and the rest of the batch completes.
func TestResultOverBoundFailsTask(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	mustExec(t, pool, `create table public.effects (n int)`)
	mustExec(t, pool, `grant insert on public.effects to worker_service_user`)
	mustExec(t, pool, `create function public.big_answer(_p jsonb) returns jsonb language plpgsql as $$
		begin
			insert into public.effects values (1);
			return jsonb_build_object('success', true, 'payload', jsonb_build_object('blob', repeat('x', (_p->>'n')::int)));
		end $$`)
	mustExec(t, pool, `grant execute on function public.big_answer(jsonb) to worker_service_user`)

	ignored := make(chan error, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("big", func(ctx context.Context, tk *taskorch.Task) error {
		var p struct{ N int }
		require.NoError(t, json.Unmarshal(tk.Payload, &p))
		ignored <- taskorch.SetResult(ctx, strings.Repeat("y", p.N))
		return nil // the error is ignored: the task fails all the same
	})
	taskorch.AddHandlerWithResult(hs, func(context.Context, *taskorch.TaskFor[Thumbnail]) (string, error) {
		return strings.Repeat("z", 2000), nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, MaxResultBytes: 1000})

	check := func(id int64, msg string) {
		t.Helper()
		task, err := c.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, taskorch.StatusFailed, task.Status, "not retried")
		require.Nil(t, task.Result)
		require.Contains(t, *task.LastError, msg)
		require.True(t, scalar[bool](t, pool, `select result is null from queues.task where task_id = $1`, id))
		require.Equal(t, "result_too_large", scalar[string](t, pool,
			`select coalesce(context->>'reason', context::text) from queues.error where task_id = $1 order by error_id desc limit 1`, id))
	}
	res, err := c.Enqueue(ctx, raw("big", `{"n": 2000}`), nil)
	require.NoError(t, err)
	check(res.TaskID, "the task's result is 2002 bytes, over the worker's limit of 1000 bytes (WorkerConfig.MaxResultBytes")
	err = <-ignored
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "over the worker's limit of 1000 bytes")

	res, err = c.Enqueue(ctx, Thumbnail{Image: "a"}, nil)
	require.NoError(t, err)
	check(res.TaskID, "the task's result is 2002 bytes, over the worker's limit of 1000 bytes")

	res, err = c.Enqueue(ctx, raw("db_function", `{"db_function": "public.big_answer", "n": 2000}`), nil)
	require.NoError(t, err)
	check(res.TaskID, "public.big_answer: the task's result is 2012 bytes, over the worker's limit of 1000 bytes")
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from public.effects`), "the function's work was rolled back")

	// Small results under the same worker are stored.
	res, err = c.Enqueue(ctx, raw("big", `{"n": 10}`), nil)
	require.NoError(t, err)
	task, err := c.Wait(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCompleted, task.Status)
	require.JSONEq(t, `"yyyyyyyyyy"`, string(task.Result))
	require.NoError(t, <-ignored)
}

// With no bound on the worker, the database's 8 MiB bound holds: in a batch, the task over it
// fails and the others complete with their results; a db_function's work is rolled back.
func TestResultOverDatabaseBound(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	mustExec(t, pool, `select queues.enqueue_many(array['r', 'r'], array['{}', '{}']::jsonb[])`)
	cl := claim(t, pool, "w1", 2, "5 minutes")
	require.Len(t, cl, 2)
	rows, err := pool.Query(ctx, `select task_id, status from queues.complete_tasks_with_results($1, $2,
			array[jsonb_build_object('blob', repeat('x', 9 * 1024 * 1024)), '{"ok": true}'::jsonb])`,
		[]int64{cl[0].TaskID, cl[1].TaskID}, []int64{cl[0].LeaseID, cl[1].LeaseID})
	require.NoError(t, err)
	got := map[int64]string{}
	for rows.Next() {
		var id int64
		var s string
		require.NoError(t, rows.Scan(&id, &s))
		got[id] = s
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[int64]string{cl[0].TaskID: "failed", cl[1].TaskID: "completed"}, got)
	require.True(t, scalar[bool](t, pool, `select result is null from queues.task where task_id = $1`, cl[0].TaskID))
	require.Regexp(t, `^the task's result is \d+ bytes, over the database's limit of 8388608 bytes \(8 MiB\) per task; the task is failed, its result not stored$`,
		scalar[string](t, pool, `select last_error from queues.task where task_id = $1`, cl[0].TaskID))
	require.Equal(t, `{"ok": true}`, scalar[string](t, pool, `select result::text from queues.task where task_id = $1`, cl[1].TaskID))

	// The constraint holds for direct writes.
	_, err = pool.Exec(ctx, `update queues.task set result = jsonb_build_object('blob', repeat('x', 9 * 1024 * 1024)) where task_id = $1`, cl[1].TaskID)
	require.ErrorContains(t, err, "task_result_size")

	// Through a worker without a bound of its own: a Go handler's result over 8 MiB.
	hs := taskorch.NewHandlers()
	hs.HandleFunc("huge", func(ctx context.Context, _ *taskorch.Task) error {
		return taskorch.SetResult(ctx, strings.Repeat("h", 9<<20))
	})
	mustExec(t, pool, `create table public.effects (n int)`)
	mustExec(t, pool, `grant insert on public.effects to worker_service_user`)
	mustExec(t, pool, `create function public.huge(_p jsonb) returns jsonb language plpgsql as $$
		begin
			insert into public.effects values (1);
			return jsonb_build_object('success', true, 'payload', repeat('x', 9 * 1024 * 1024));
		end $$`)
	mustExec(t, pool, `grant execute on function public.huge(jsonb) to worker_service_user`)
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, MaxResultBytes: -1})
	for _, args := range []taskorch.TaskArgs{raw("huge", `{}`), raw("db_function", `{"db_function": "public.huge"}`)} {
		res, err := c.Enqueue(ctx, args, nil)
		require.NoError(t, err)
		task, err := c.Wait(ctx, res.TaskID)
		require.NoError(t, err)
		require.Equal(t, taskorch.StatusFailed, task.Status, args.TaskType())
		require.Nil(t, task.Result)
		require.Contains(t, *task.LastError, "over the database's limit of 8388608 bytes (8 MiB) per task", args.TaskType())
	}
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from public.effects`), "the function's work was rolled back")
}

// SetResult refuses what is not JSON, and a context that is not a handler's, with an error
// matching ErrInvalidInput; the result set before stands.
func TestSetResultBadInput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)

	err := taskorch.SetResult(ctx, 1)
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "SetResult needs the context a worker gave a Go handler")

	errs := make(chan []error, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("bad", func(ctx context.Context, _ *taskorch.Task) error {
		e := []error{taskorch.SetResult(ctx, map[string]int{"kept": 1})}
		e = append(e, taskorch.SetResult(ctx, json.RawMessage(`{"not json`)))
		e = append(e, taskorch.SetResult(ctx, make(chan int)))
		e = append(e, taskorch.SetResult(ctx, func() {}))
		errs <- e
		return nil
	})
	taskorch.AddHandlerWithResult(hs, func(context.Context, *taskorch.TaskFor[Thumbnail]) (any, error) {
		return map[string]any{"f": func() {}}, nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	res, err := c.Enqueue(ctx, raw("bad", `{}`), nil)
	require.NoError(t, err)
	task, err := c.Wait(ctx, res.TaskID)
	require.NoError(t, err)
	got := <-errs
	require.NoError(t, got[0])
	for _, e := range got[1:] {
		require.ErrorIs(t, e, taskorch.ErrInvalidInput)
		require.ErrorContains(t, e, "the task's result does not marshal to JSON")
	}
	require.ErrorContains(t, got[1], "json.RawMessage: unexpected end of JSON input")
	require.ErrorContains(t, got[2], "unsupported type: chan int")
	require.Equal(t, taskorch.StatusCompleted, task.Status)
	require.JSONEq(t, `{"kept": 1}`, string(task.Result), "the result set before stands")

	// A typed handler's result that is not JSON fails the task, without retry.
	res, err = c.Enqueue(ctx, Thumbnail{Image: "x"}, nil)
	require.NoError(t, err)
	task, err = c.Wait(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusFailed, task.Status)
	require.Contains(t, *task.LastError, "the task's result does not marshal to JSON: json: unsupported type: func()")
	require.Nil(t, task.Result)
}

// A handler that fails keeps no result: a result is stored only with a completion.
func TestResultOnlyWithCompletion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("fails", func(ctx context.Context, _ *taskorch.Task) error {
		require.NoError(t, taskorch.SetResult(ctx, "partial"))
		return taskorch.Discard(errors.New("no"))
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	res, err := c.Enqueue(ctx, raw("fails", `{}`), nil)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	task, err := c.Wait(wctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusFailed, task.Status)
	require.Nil(t, task.Result)
}
