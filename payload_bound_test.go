package taskorch_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A payload over 8 MiB is refused by every enqueue function with invalid_parameter_value, a
// message that says the size and the limit, a hint, and no row dumped; the check constraint
// still stops a direct insert, and both map to ErrInvalidInput with a clear message. A payload
// under the limit still goes in by each path.
func TestPayloadBoundInEveryEnqueueFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	const big = `jsonb_build_object('blob', repeat('x', 9 * 1024 * 1024))`
	const fits = `jsonb_build_object('blob', repeat('y', 7 * 1024 * 1024))`

	for _, tc := range []struct{ sql, label string }{
		{`select queues.enqueue('big', ` + big + `)`, "enqueue: "},
		{`select queues.enqueue_with_result('big', ` + big + `)`, "enqueue: "},
		{`select queues.enqueue_many(array['big', 'big'], array['{}'::jsonb, ` + big + `])`, "task 2 of 2: "},
		{`select * from queues.enqueue_many_with_result(array['big', 'big'], array[` + big + `, '{}'::jsonb], _idempotency_keys => array['a', 'b'])`, "task 1 of 2: "},
		{`select * from queues.enqueue_debounced('big', ` + big + `, 'k', '1 minute')`, "enqueue_debounced: "},
		{`select queues.add_schedule('big', '* * * * *', 'big', ` + big + `)`, "add_schedule: "},
	} {
		_, err := pool.Exec(ctx, tc.sql)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", tc.sql, err)
		require.Equal(t, "22023", pgErr.Code, tc.sql)
		require.Regexp(t, `^`+tc.label+`payload is \d+ bytes, over the limit of 8388608 bytes \(8 MiB\) per task$`, pgErr.Message)
		require.Contains(t, pgErr.Hint, "put its key in the payload")
		require.Empty(t, pgErr.Detail, "no row dumped")

		mapped := taskorch.MapPgError(err)
		require.ErrorIs(t, mapped, taskorch.ErrInvalidInput)
		require.Contains(t, mapped.Error(), "over the limit of 8388608 bytes (8 MiB) per task. Store large data elsewhere")
		require.NotContains(t, mapped.Error(), "xxxxxxxx")
	}

	// A debounced task already pending does not take an oversized payload either.
	_, err := pool.Exec(ctx, `select * from queues.enqueue_debounced('deb', '{}', 'k', '1 minute')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `select * from queues.enqueue_debounced('deb', `+big+`, 'k', '1 minute')`)
	require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrInvalidInput)
	require.True(t, scalar[bool](t, pool, `select payload = '{}' from queues.task where task_type = 'deb'`), "the pending task keeps its payload")

	// The constraint is the last line of defence, for a direct insert (or COPY).
	_, err = pool.Exec(ctx, `insert into queues.task (task_type, payload) values ('big', `+big+`)`)
	require.ErrorContains(t, err, `violates check constraint "task_payload_size"`)
	mapped := taskorch.MapPgError(err)
	require.ErrorIs(t, mapped, taskorch.ErrInvalidInput)
	require.Equal(t, "taskorch: the payload is over the database's limit of 8 MiB per task (constraint task_payload_size). "+
		"Store large data elsewhere (a table, object storage) and put its key in the payload.", mapped.Error())
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task where task_type = 'big'`))

	// Under the limit, every path takes it.
	for _, sql := range []string{
		`select queues.enqueue('fits', ` + fits + `)`,
		`select queues.enqueue_many(array['fits', 'fits'], array['{}'::jsonb, ` + fits + `])`,
		`select * from queues.enqueue_many_with_result(array['fits'], array[` + fits + `], _idempotency_keys => array['a'])`,
		`select * from queues.enqueue_debounced('fits', ` + fits + `, 'k', '1 minute')`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	require.Equal(t, 4, scalar[int](t, pool, `select count(*)::int from queues.task where task_type = 'fits' and payload ? 'blob'`))

	// The Go client's own bound names itself and how to change it.
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, taskorch.RawArgs{Type: "big", Payload: []byte(`{"blob":"` + strings.Repeat("z", 2<<20) + `"}`)}, nil)
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.EqualError(t, err, "taskorch: payload of big is 2097163 bytes, over the client's limit of 1048576 bytes "+
		"(ClientConfig.MaxPayloadBytes, 1 MiB by default; the database refuses payloads over 8 MiB whatever it is)")
}
