package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// ListQueues needs what its doc comment says and no more: an operator's role with SELECT on
// queues.task, queue_pause, worker and schedule lists each function's queue; an application's
// role, granted enqueueing only, may not read them.
func TestListQueuesRoles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	ops, app := "ops_"+hex.EncodeToString(suffix), "app_"+hex.EncodeToString(suffix)
	opsID, appID := pgx.Identifier{ops}.Sanitize(), pgx.Identifier{app}.Sanitize()
	_, err := pool.Exec(ctx, `create role `+opsID+` nologin; create role `+appID+` nologin;
		grant usage on schema queues to `+opsID+`;
		grant select on queues.task, queues.queue_pause, queues.worker, queues.schedule to `+opsID+`;
		create schema billing;
		create function billing.recalc(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		grant usage on schema billing to `+appID+`;
		grant execute on function billing.recalc(jsonb) to `+appID)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `drop schema billing cascade; drop owned by `+opsID+`; drop owned by `+appID+`; drop role `+opsID+`; drop role `+appID)
		require.NoError(t, err)
	})
	_, err = pool.Exec(ctx, `select queues.grant_enqueue($1)`, app)
	require.NoError(t, err)

	as := func(role string, f func(tx pgx.Tx) error) error {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `set local role `+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
		return f(tx)
	}
	// The application enqueues a task of its function; the operator lists it as its queue.
	require.NoError(t, as(app, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `select queues.enqueue('db_function', '{"db_function": "billing.recalc"}')`); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}))
	require.NoError(t, as(ops, func(tx pgx.Tx) error {
		qs, err := ListQueues(ctx, tx)
		require.NoError(t, err)
		require.Len(t, qs, 1)
		require.Equal(t, "db_function:billing.recalc", qs[0].TaskType)
		require.Equal(t, int64(1), qs[0].Due)
		return nil
	}))
	err = as(app, func(tx pgx.Tx) error {
		_, err := ListQueues(ctx, tx)
		return err
	})
	require.ErrorContains(t, err, "permission denied")
}
