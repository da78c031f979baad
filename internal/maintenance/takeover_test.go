package maintenance

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// registerInstance registers worker id as process instance through db (with a session when
// session: db is then the session's connection) and returns the tasks it took over, or the
// error.
func registerInstance(t testing.TB, db DB, id, instance string, session bool, timeout time.Duration) (int, error) {
	t.Helper()
	var key *int32
	var recovered int
	err := db.QueryRow(t.Context(), `select session_key, tasks_recovered
		from queues.register_worker_instance($1, $2, 'h', 1, 4, 'v', 'postgres', null, $3, $4)`,
		id, instance, session, timeout).Scan(&key, &recovered)
	if err == nil {
		require.Equal(t, session, key != nil, "a session key with a session only")
	}
	return recovered, err
}

func requireInUse(t testing.TB, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "55006", pgErr.Code, pgErr.Message)
	require.Contains(t, pgErr.Message, "in use by a live worker")
}

// A worker restarted under the same id (a fixed TASKORCH_WORKER_ID) after its process was
// killed takes the id over at once: the previous process's running tasks are recovered at
// registration (cause worker_restarted, fenced: its late completion is refused), its leadership
// ends, and the row is the new process's. While the previous process's session lives, the
// new one is refused (55006) and nothing changes.
func TestRestartedWorkerTakesOverItsID(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	first, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	_, err = registerInstance(t, first, "w1", "process-1", true, time.Hour)
	require.NoError(t, err)
	enqueueN(t, pool, "s", 3)
	tasks, leases := claimFor(t, pool, "w1", 3)
	require.Len(t, tasks, 3)
	term := scalar[int64](t, pool, `select queues.acquire_leadership('w1', interval '1 minute', 'process-1')`)

	// The first process lives: refused, whatever the heartbeat says.
	mustExec(t, pool, `update queues.worker set last_heartbeat = now() - interval '1 day' where worker_id = 'w1'`)
	second, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = second.Close(ctx) })
	_, err = registerInstance(t, second, "w1", "process-2", true, time.Hour)
	requireInUse(t, err)
	require.Equal(t, "process-1", scalar[string](t, pool, `select instance from queues.worker where worker_id = 'w1'`))
	require.Equal(t, 3, scalar[int](t, pool, `select count(*) from queues.task where worker_id = 'w1' and status = 'running'`))

	// Killed: its session ends (once its backend has exited). The restarted process takes over.
	pid := first.PgConn().PID()
	require.NoError(t, first.Close(ctx))
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select not exists (select from pg_stat_activity where pid = $1)`, pid)
	}, waitTimeout, 5*time.Millisecond)
	recovered, err := registerInstance(t, second, "w1", "process-2", true, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 3, recovered)
	for i, id := range tasks {
		require.Equal(t, "pending", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
		require.Equal(t, "worker_restarted", scalar[string](t, pool,
			`select context->>'cause' from queues.error where task_id = $1 and (context->>'lease_id')::bigint = $2`, id, leases[i]))
		require.False(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, id, leases[i]))
	}
	require.Equal(t, "process-2", scalar[string](t, pool, `select instance from queues.worker where worker_id = 'w1'`))
	require.True(t, scalar[bool](t, pool, `select worker_id is null from queues.leader`), "the dead process's leadership ended")
	got := scalar[int64](t, pool, `select queues.acquire_leadership('w1', interval '1 minute', 'process-2')`)
	require.Equal(t, term+1, got, "the new process leads under a new term")

	// The old process's calls do nothing under the new one's row.
	require.False(t, scalar[bool](t, pool, `select queues.heartbeat_worker('w1', 'process-1')`))
	require.Nil(t, scalar[*int64](t, pool, `select queues.acquire_leadership('w1', interval '1 minute', 'process-1')`))
	require.False(t, scalar[bool](t, pool, `select queues.deregister_worker('w1', 'process-1')`))
	require.True(t, scalar[bool](t, pool, `select queues.heartbeat_worker('w1', 'process-2')`))

	// The same process registering again (its session was lost) keeps what it holds.
	_, _ = claimFor(t, pool, "w1", 1)
	third, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = third.Close(ctx) })
	recovered, err = registerInstance(t, third, "w1", "process-2", true, time.Hour)
	require.NoError(t, err)
	require.Zero(t, recovered)
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task where worker_id = 'w1' and status = 'running'`))
}

// Without a session (PollOnly) the previous process lives as long as its heartbeat is younger
// than the worker timeout: refused until then, taken over after.
func TestRestartedWorkerTakesOverBySilence(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := registerInstance(t, pool, "w1", "process-1", false, time.Minute)
	require.NoError(t, err)
	enqueueN(t, pool, "s", 2)
	tasks, _ := claimFor(t, pool, "w1", 2)
	require.Len(t, tasks, 2)

	_, err = registerInstance(t, pool, "w1", "process-2", false, time.Minute)
	requireInUse(t, err)
	mustExec(t, pool, `update queues.worker set last_heartbeat = now() - interval '61 seconds' where worker_id = 'w1'`)
	recovered, err := registerInstance(t, pool, "w1", "process-2", false, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 2, recovered)
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task where status = 'running'`))

	// A row registered the old way (register_worker, no process) is taken over the same way;
	// and register_worker does not replace a process's row.
	mustExec(t, pool, `select queues.register_worker('tool', 'h')`)
	_, err = registerInstance(t, pool, "tool", "process-3", false, time.Minute)
	requireInUse(t, err)
	_, err = pool.Exec(t.Context(), `select queues.register_worker('w1', 'h')`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "55006", pgErr.Code)
}

// Bad input to the registration is refused with 22023, naming the argument, and writes nothing.
func TestRegisterWorkerInstanceInput(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	for _, c := range []struct {
		sql  string
		want string
	}{
		{`select * from queues.register_worker_instance(null, 'i', 'h', 1, 1, null, null, null, false, '30 s')`, "_worker_id"},
		{`select * from queues.register_worker_instance('  ', 'i', 'h', 1, 1, null, null, null, false, '30 s')`, "_worker_id"},
		{`select * from queues.register_worker_instance(repeat('x', 257), 'i', 'h', 1, 1, null, null, null, false, '30 s')`, "_worker_id"},
		{`select * from queues.register_worker_instance('w', null, 'h', 1, 1, null, null, null, false, '30 s')`, "_instance"},
		{`select * from queues.register_worker_instance('w', '', 'h', 1, 1, null, null, null, false, '30 s')`, "_instance"},
		{`select * from queues.register_worker_instance('w', 'i', null, 1, 1, null, null, null, false, '30 s')`, "_hostname"},
		{`select * from queues.register_worker_instance('w', 'i', 'h', 1, -1, null, null, null, false, '30 s')`, "_pool_size"},
		{`select * from queues.register_worker_instance('w', 'i', 'h', 1, 1, null, null, null, null, '30 s')`, "_session"},
		{`select * from queues.register_worker_instance('w', 'i', 'h', 1, 1, null, null, null, false, '0 s')`, "_worker_timeout"},
		{`select * from queues.register_worker_instance('w', 'i', 'h', 1, 1, null, null, null, false, '2 days')`, "_worker_timeout"},
		{`select * from queues.register_worker_instance('w', 'i', 'h', 1, 1, null, null, null, false, null)`, "_worker_timeout"},
	} {
		_, err := pool.Exec(t.Context(), c.sql)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, c.sql)
		require.Equal(t, "22023", pgErr.Code, c.sql)
		require.Contains(t, pgErr.Message, c.want, c.sql)
	}
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.worker`))
}
