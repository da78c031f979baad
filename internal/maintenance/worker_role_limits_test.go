package maintenance

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// asWorkerRole runs fn in a transaction as worker_service_user, rolled back after.
func asWorkerRole(t *testing.T, pool *pgxpool.Pool, fn func(tx pgx.Tx)) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
	_, err = tx.Exec(t.Context(), `set local role worker_service_user`)
	require.NoError(t, err)
	fn(tx)
}

func requireCode(t *testing.T, err error, code, contains string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, pgErr.Message)
	require.Contains(t, pgErr.Message, contains)
}

// The worker role leads only as a registered, live worker and for at most an hour: an
// unregistered id gets nothing (NULL, the lease untouched), a century is refused (22023), and
// a lease held by an id that is not registered (any more) is taken by a registered worker at
// once, however long it had to run.
func TestLeadershipOnlyForLiveWorkers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	asWorkerRole(t, pool, func(tx pgx.Tx) {
		_, err := tx.Exec(ctx, `savepoint s`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `select queues.acquire_leadership('evil', interval '100 years')`)
		requireCode(t, err, "22023", "_ttl must be positive and at most 1 hour")
		_, err = tx.Exec(ctx, `rollback to savepoint s`)
		require.NoError(t, err)
		for _, sql := range []string{
			`select queues.acquire_leadership(null, interval '1 minute')`,
			`select queues.acquire_leadership(' ', interval '1 minute')`,
			`select queues.acquire_leadership('w', interval '0 s')`,
			`select queues.acquire_leadership('w', null)`,
		} {
			_, err = tx.Exec(ctx, sql)
			requireCode(t, err, "22023", "acquire_leadership")
			_, err = tx.Exec(ctx, `rollback to savepoint s`)
			require.NoError(t, err)
		}
		var term *int64
		require.NoError(t, tx.QueryRow(ctx, `select queues.acquire_leadership('evil', interval '1 hour')`).Scan(&term))
		require.Nil(t, term, "not registered: no lease")
		require.NoError(t, tx.QueryRow(ctx, `select queues.acquire_leadership('evil', interval '1 hour', 'any')`).Scan(&term))
		require.Nil(t, term)
	})
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.leader`))

	// A lease left to an id that is not registered (deregistered, reaped, or written by hand)
	// is free for a registered worker.
	mustExec(t, pool, `insert into queues.leader (name, worker_id, term, elected_at, expires_at)
		values ('default', 'gone', 7, now(), now() + interval '100 years')`)
	mustExec(t, pool, `select queues.register_worker('w', 'h')`)
	require.Equal(t, int64(8), scalar[int64](t, pool, `select queues.acquire_leadership('w', interval '1 minute')`))
	require.Equal(t, "w", scalar[string](t, pool, `select worker_id from queues.leader`))
}

// A claim needs a worker id: NULL or blank is refused with 22023 and leases nothing, whatever
// the entry point. An id that is not registered may claim (psql's dequeue_next_available_task
// claims as 'sql:<role>'): its task is not recovered by the leader, and comes back when its
// lease expires.
func TestClaimNeedsAWorkerID(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	enqueueN(t, pool, "c", 2)
	ids := scalar[[]int64](t, pool, `select array_agg(task_id order by task_id) from queues.task`)
	asWorkerRole(t, pool, func(tx pgx.Tx) {
		for _, sql := range []string{
			`select * from queues.claim_tasks(null, 1)`,
			`select * from queues.claim_tasks('', 1)`,
			`select * from queues.claim_tasks('   ', 1)`,
			`select * from queues.claim_tasks_by_id(null, array[` + fmt.Sprint(ids[0]) + `, ` + fmt.Sprint(ids[1]) + `]::bigint[])`,
			`select * from queues.dequeue_next_available_task(null)`,
		} {
			_, err := tx.Exec(ctx, `savepoint s`)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, sql)
			requireCode(t, err, "22023", "_worker_id must name the claiming worker")
			_, err = tx.Exec(ctx, `rollback to savepoint s`)
			require.NoError(t, err)
		}
		_, err := tx.Exec(ctx, `select queues.release_worker_tasks(null)`)
		requireCode(t, err, "22023", "release_worker_tasks: _worker_id")
	})
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task where status <> 'pending'`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_lease`))

	// psql's dequeue, as a role with no worker id: it claims, and the lease names the role.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var id int64
	var worker string
	require.NoError(t, tx.QueryRow(ctx, `select task_id, worker_id from queues.dequeue_next_available_task()`).Scan(&id, &worker))
	require.Equal(t, ids[0], id)
	require.Equal(t, "sql:postgres", worker)
	require.NoError(t, tx.Commit(ctx))

	// Not registered, so no reaper finds it; its lease's expiry does.
	term := lead(t, pool, "boss")
	reaped, err := ReapLostSessions(ctx, pool, 0, term)
	require.NoError(t, err)
	require.Empty(t, reaped)
	require.Equal(t, "running", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
	mustExec(t, pool, `update queues.task set lease_expires_at = now() - interval '1 second' where task_id = $1`, id)
	require.Equal(t, 1, scalar[int](t, pool, `select queues.rescue_expired_leases()`))
	require.Equal(t, "pending", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
}
