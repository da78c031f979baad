package taskorch_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

type welcomeEmail struct {
	AccountID int64  `json:"account_id"`
	Locale    string `json:"locale"`
}

func (welcomeEmail) TaskType() string { return "welcome_email" }

type urgentArgs struct{}

func (urgentArgs) TaskType() string { return "urgent" }
func (urgentArgs) EnqueueOpts() taskorch.EnqueueOpts {
	return taskorch.EnqueueOpts{Priority: new(9), MaxAttempts: 2}
}

func TestEnqueueTypedArgs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t)
	at := time.Now().Add(time.Minute).Truncate(time.Microsecond)
	res, err := c.Enqueue(ctx, welcomeEmail{AccountID: 42, Locale: "fr"}, &taskorch.EnqueueOpts{ScheduledAt: at, Priority: new(3)})
	require.NoError(t, err)
	require.False(t, res.Duplicate)

	task, err := c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, "welcome_email", task.Type)
	require.JSONEq(t, `{"account_id":42,"locale":"fr"}`, string(task.Payload))
	require.Equal(t, taskorch.StatusPending, task.Status)
	require.Equal(t, 3, task.Priority)
	require.Equal(t, 25, task.MaxAttempts)
	require.True(t, at.Equal(task.ScheduledAt))
	require.True(t, at.Equal(task.RunAt))
	require.Nil(t, task.IdempotencyKey)

	// Options carried by the args type, overridden field by field.
	res, err = c.Enqueue(ctx, urgentArgs{}, &taskorch.EnqueueOpts{MaxAttempts: 7})
	require.NoError(t, err)
	task, err = c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, 9, task.Priority)
	require.Equal(t, 7, task.MaxAttempts)

	// An explicit priority of 0 overrides the args' default of 9; nil keeps the default.
	res, err = c.Enqueue(ctx, urgentArgs{}, &taskorch.EnqueueOpts{Priority: new(0)})
	require.NoError(t, err)
	task, err = c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, 0, task.Priority)
	require.Equal(t, 2, task.MaxAttempts, "the fields not set keep the args' defaults")
	res, err = c.Enqueue(ctx, urgentArgs{}, &taskorch.EnqueueOpts{Priority: nil})
	require.NoError(t, err)
	task, err = c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, 9, task.Priority)
	res, err = c.Enqueue(ctx, urgentArgs{}, &taskorch.EnqueueOpts{Priority: new(-3)})
	require.NoError(t, err)
	task, err = c.Get(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, -3, task.Priority)

	// The same in a batch: an explicit 0 is sent as 0, not as the default.
	results, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{
		{Args: urgentArgs{}},
		{Args: urgentArgs{}, Opts: &taskorch.EnqueueOpts{Priority: new(0)}},
		{Args: raw("plain", `{}`)},
	})
	require.NoError(t, err)
	for i, want := range []int{9, 0, 0} {
		task, err = c.Get(ctx, results[i].TaskID)
		require.NoError(t, err)
		require.Equal(t, want, task.Priority, "task %d", i)
	}
}

// A task enqueued in the application's transaction exists only if that transaction commits.
func TestEnqueueTxFollowsTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	rolledBack, err := c.EnqueueTx(ctx, tx, raw("tx", `{"n":1}`), nil)
	require.NoError(t, err)
	ids, err := c.EnqueueManyTx(ctx, tx, []taskorch.EnqueueParams{{Args: raw("tx", `{"n":2}`)}})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	_, err = c.Get(ctx, rolledBack.TaskID)
	require.ErrorIs(t, err, taskorch.ErrNotFound)
	_, err = c.Get(ctx, ids[0].TaskID)
	require.ErrorIs(t, err, taskorch.ErrNotFound)

	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	committed, err := c.EnqueueTx(ctx, tx, raw("tx", `{"n":3}`), nil)
	require.NoError(t, err)
	task, err := c.CancelTx(ctx, tx, committed.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, task.Status)
	task, err = c.RetryTx(ctx, tx, committed.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusPending, task.Status)
	require.NoError(t, tx.Commit(ctx))
	task, err = c.Get(ctx, committed.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusPending, task.Status)
}

// Concurrent enqueues with one idempotency key create one task and all return its id.
func TestIdempotencyKeyConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 20})
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)

	const callers = 16
	results := make([]*taskorch.EnqueueResult, callers)
	start := make(chan struct{})
	var g errgroup.Group
	for i := range callers {
		g.Go(func() error {
			<-start
			r, err := c.Enqueue(ctx, raw("charge", `{"order":7}`), &taskorch.EnqueueOpts{IdempotencyKey: "order-7"})
			results[i] = r
			return err
		})
	}
	close(start)
	require.NoError(t, g.Wait())

	fresh := 0
	for _, r := range results {
		require.Equal(t, results[0].TaskID, r.TaskID)
		if !r.Duplicate {
			fresh++
		}
	}
	require.Equal(t, 1, fresh, "exactly one caller created the task")
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'charge'`))

	// The key is scoped to the type.
	other, err := c.Enqueue(ctx, raw("refund", `{}`), &taskorch.EnqueueOpts{IdempotencyKey: "order-7"})
	require.NoError(t, err)
	require.NotEqual(t, results[0].TaskID, other.TaskID)
	// From SQL too.
	require.Equal(t, results[0].TaskID, scalar[int64](t, pool, `select queues.enqueue('charge', '{}', now(), 0, 'order-7')`))
}

// Concurrent bulk enqueues sharing keys: one task per key, every caller gets its id.
func TestEnqueueManyIdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 10})
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var mu sync.Mutex
	byKey := map[string]map[int64]bool{}
	inserted := map[string]int{} // results that were not duplicates, by key
	var g errgroup.Group
	for w := range 6 {
		g.Go(func() error {
			var params []taskorch.EnqueueParams
			for i := range keys {
				k := keys[(i+w)%len(keys)] // each caller in its own order
				params = append(params, taskorch.EnqueueParams{Args: raw("bulk", `{}`), Opts: &taskorch.EnqueueOpts{IdempotencyKey: k}})
			}
			results, err := c.EnqueueMany(ctx, params)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for i, r := range results {
				k := keys[(i+w)%len(keys)]
				if byKey[k] == nil {
					byKey[k] = map[int64]bool{}
				}
				byKey[k][r.TaskID] = true
				inserted[k] += map[bool]int{false: 1}[r.Duplicate]
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	for _, k := range keys {
		require.Len(t, byKey[k], 1, "key %s mapped to several tasks", k)
		require.Equal(t, 1, inserted[k], "key %s: exactly one caller inserted its task; the others got duplicates", k)
	}
	require.Equal(t, int64(len(keys)), scalar[int64](t, pool, `select count(*) from queues.task`))
}

func TestEnqueueMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	results, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{
		{Args: raw("m", `{"i":0}`)},
		{Args: raw("m", `{"i":1}`), Opts: &taskorch.EnqueueOpts{IdempotencyKey: "k"}},
		{Args: raw("n", `{"i":2}`), Opts: &taskorch.EnqueueOpts{Priority: new(4), MaxAttempts: 2}},
		{Args: raw("m", `{"i":3}`), Opts: &taskorch.EnqueueOpts{IdempotencyKey: "k"}},
	})
	require.NoError(t, err)
	require.Len(t, results, 4)
	ids := make([]int64, len(results))
	for i, r := range results {
		ids[i] = r.TaskID
	}
	require.Equal(t, []bool{false, false, false, true}, []bool{results[0].Duplicate, results[1].Duplicate,
		results[2].Duplicate, results[3].Duplicate}, "the second use of a key in a batch is a duplicate")
	require.Equal(t, ids[1], ids[3], "a key repeated in one batch maps to one task")
	require.Less(t, ids[0], ids[1])
	require.Less(t, ids[1], ids[2], "ids follow input order")
	for i, id := range ids[:3] {
		task, err := c.Get(ctx, id)
		require.NoError(t, err)
		var p struct{ I int }
		require.NoError(t, json.Unmarshal(task.Payload, &p))
		require.Equal(t, i, p.I)
	}
	task, err := c.Get(ctx, ids[2])
	require.NoError(t, err)
	require.Equal(t, 4, task.Priority)
	require.Equal(t, 2, task.MaxAttempts)

	// Again with the same key: the existing id comes back.
	again, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{
		{Args: raw("m", `{}`), Opts: &taskorch.EnqueueOpts{IdempotencyKey: "k"}},
		{Args: raw("m", `{}`), Opts: &taskorch.EnqueueOpts{IdempotencyKey: "new"}},
		{Args: raw("m", `{}`)},
	})
	require.NoError(t, err)
	require.Equal(t, taskorch.EnqueueResult{TaskID: ids[1], Duplicate: true}, *again[0])
	require.False(t, again[1].Duplicate)
	require.False(t, again[2].Duplicate)
	require.Equal(t, int64(5), scalar[int64](t, pool, `select count(*) from queues.task`), "3 before, 2 new")

	// From SQL, the same results; enqueue_many itself still returns the ids.
	rows, err := pool.Query(ctx, `select task_id, duplicate from queues.enqueue_many_with_result(
		array['m', 'm'], array['{}', '{}']::jsonb[], _idempotency_keys => array['k', null])`)
	require.NoError(t, err)
	fromSQL, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (taskorch.EnqueueResult, error) {
		var res taskorch.EnqueueResult
		return res, r.Scan(&res.TaskID, &res.Duplicate)
	})
	require.NoError(t, err)
	require.Len(t, fromSQL, 2)
	require.Equal(t, taskorch.EnqueueResult{TaskID: ids[1], Duplicate: true}, fromSQL[0])
	require.False(t, fromSQL[1].Duplicate)
	plain := scalar[[]int64](t, pool, `select queues.enqueue_many(array['m', 'm'], array['{}', '{}']::jsonb[], _idempotency_keys => array['k', null])`)
	require.Len(t, plain, 2)
	require.Equal(t, ids[1], plain[0])
	require.Greater(t, plain[1], fromSQL[1].TaskID)
	require.Equal(t, []int64{}, scalar[[]int64](t, pool, `select queues.enqueue_many('{}', '{}')`))
	require.Empty(t, scalar[[]int64](t, pool, `select array_agg(task_id) from queues.enqueue_many_with_result('{}', '{}')`))

	empty, err := c.EnqueueMany(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, empty)
}

// Bad input gets a clear error and writes nothing.
func TestEnqueueBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	for _, tc := range []struct {
		name string
		args taskorch.TaskArgs
		opts *taskorch.EnqueueOpts
		want string
	}{
		{"empty type", raw("", `{}`), nil, "task type must not be empty"},
		{"malformed type", raw("drop table x;--", `{}`), nil, "is malformed"},
		{"long type", raw(strings.Repeat("a", 129), `{}`), nil, "is malformed"},
		{"array payload", raw("t", `[1,2]`), nil, "must be a JSON object"},
		{"string payload", raw("t", `"hi"`), nil, "must be a JSON object"},
		{"invalid json", raw("t", `{"a":`), nil, "does not marshal to JSON"},
		{"negative max attempts", raw("t", `{}`), &taskorch.EnqueueOpts{MaxAttempts: -1}, "max attempts must be between 1 and"},
		{"huge key", raw("t", `{}`), &taskorch.EnqueueOpts{IdempotencyKey: strings.Repeat("k", 513)}, "idempotency key"},
		{"oversized payload", raw("t", `{"x":"`+strings.Repeat("x", 1<<20)+`"}`), nil, "over the client's limit of 1048576 bytes"},
		{"nil args", nil, nil, "args must not be nil"},
	} {
		_, err := c.Enqueue(ctx, tc.args, tc.opts)
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	_, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{{Args: raw("ok", `{}`)}, {Args: raw("t", `[]`)}})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "task 2 of 2")

	// The SQL API checks the same things for callers that do not go through Go.
	for _, tc := range []struct{ sql, want string }{
		{`select queues.enqueue('', '{}')`, "task_type must not be empty"},
		{`select queues.enqueue('x y', '{}')`, "is malformed"},
		{`select queues.enqueue('t', '[]')`, "payload must be a JSON object, got array"},
		{`select queues.enqueue('t', null)`, "payload must be a JSON object, got null"},
		{`select queues.enqueue('t', '{}', _max_attempts => 0)`, "max_attempts must be at least 1, got 0"},
		{`select queues.enqueue_many(array['a','b'], array['{}','7']::jsonb[])`, "task 2 of 2: payload must be a JSON object, got number"},
		{`select queues.enqueue_many(array['a','b'], array['{}']::jsonb[])`, "must all have 2 elements"},
	} {
		_, err := pool.Exec(ctx, tc.sql)
		require.ErrorContains(t, err, tc.want, tc.sql)
		require.ErrorIs(t, mapErrForTest(err), taskorch.ErrInvalidInput, tc.sql)
	}
	require.Equal(t, int64(0), scalar[int64](t, pool, `select count(*) from queues.task`), "nothing half-written")
}

// mapErrForTest runs a raw pgx error through the client's error mapping by way of a call that
// surfaces the same SQLSTATE.
func mapErrForTest(err error) error {
	return taskorch.MapPgError(err)
}

type nulArgs struct{ S string }

func (nulArgs) TaskType() string { return "nul.args" }

// A payload PostgreSQL cannot store (a NUL character in a string) is refused as bad input with
// a message that says why, and nothing is written.
func TestEnqueueNULIsInputError(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	_, err := c.Enqueue(context.Background(), nulArgs{S: "a\x00b"}, nil)
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "NUL characters")
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task`))
}
