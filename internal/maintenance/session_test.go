package maintenance

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A worker whose session is gone for good (its process died: the connection closed, and no
// new one comes) loses its running tasks to the leader's session check once the grace has
// passed, long before its heartbeat would go stale (the worker timeout is an hour here): each
// task back to pending with a 'recovered' event and an error row whose cause is session_lost,
// its row deleted. The recovery is fenced: the worker's late completion under the old lease is
// refused, and when it comes back it registers again with a new row, keeping nothing.
func TestSessionGoneRecoversTasks(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ev := newEvents()
	lcfg, _ := withSession(pool, testConfig("w-leader", ev))
	lcfg.WorkerTimeout = time.Hour
	lcfg.SessionGrace = 200 * time.Millisecond
	start(t, pool, lcfg)
	ev.wait(t, "elected", kindOf("w-leader", EventElected))

	vcfg, gate := withSession(pool, testConfig("w-victim", ev))
	vcfg.WorkerTimeout = time.Hour
	start(t, pool, vcfg)
	ev.wait(t, "victim registered", kindOf("w-victim", EventRegistered))
	enqueueN(t, pool, "s", 3)
	tasks, leases := claimFor(t, pool, "w-victim", 3)
	require.Len(t, tasks, 3)

	gate.block()
	cutSession(t, pool, "w-victim")
	_, reaped := ev.wait(t, "the victim's tasks recovered", reapedBy("w-leader", "w-victim", CauseSession))
	require.Equal(t, 3, reaped.Tasks)

	for i, id := range tasks {
		require.Equal(t, "pending", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
		require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, id), "the lost lease counts")
		require.Equal(t, "session_lost", scalar[string](t, pool,
			`select context->>'cause' from queues.error where task_id = $1 and (context->>'lease_id')::bigint = $2`, id, leases[i]))
		require.Contains(t, scalar[string](t, pool,
			`select detail from queues.task_event where task_id = $1 and lease_id = $2 and event = 'recovered'`, id, leases[i]),
			"w-victim lost its database session")
		require.False(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, id, leases[i]), "a late outcome is refused")
	}
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_event where event = 'lease_expired'`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.worker where worker_id = 'w-victim'`), "its row is deleted")

	// Back (its connection heals): it registers again, on a new session, and holds nothing.
	from := 0
	ev.waitFrom(t, &from, "victim registered", kindOf("w-victim", EventRegistered))
	gate.unblock()
	_, again := ev.waitFrom(t, &from, "victim registered again", kindOf("w-victim", EventRegistered))
	require.True(t, again.Reregistered)
	require.Zero(t, again.Tasks, "its own tasks are not a predecessor's")
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task where worker_id = 'w-victim' and status = 'running'`))
}

// A live worker whose session was cut registers again on a new session and keeps its tasks,
// even when the leader saw the session gone meanwhile: here the test lets the worker back only
// once the leader has marked it, then waits until the grace has passed since the mark and the
// leader has checked twice more. Nothing was recovered; the leases still hold.
func TestSessionBackWithinGraceKeepsTasks(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ev := newEvents()
	const grace = 2 * time.Second
	lcfg, _ := withSession(pool, testConfig("w-leader", ev))
	lcfg.WorkerTimeout = time.Hour
	lcfg.SessionGrace = grace
	start(t, pool, lcfg)
	ev.wait(t, "elected", kindOf("w-leader", EventElected))

	vcfg, gate := withSession(pool, testConfig("w-live", ev))
	start(t, pool, vcfg)
	from := 0
	ev.waitFrom(t, &from, "registered", kindOf("w-live", EventRegistered))
	enqueueN(t, pool, "s", 2)
	tasks, leases := claimFor(t, pool, "w-live", 2)
	require.Len(t, tasks, 2)

	gate.block()
	oldKey := cutSession(t, pool, "w-live")
	ev.waitFrom(t, &from, "session lost", kindOf("w-live", EventSessionLost))
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select session_lost_at is not null from queues.worker where worker_id = 'w-live'`)
	}, waitTimeout, 5*time.Millisecond, "the leader marks the session gone")
	marked := scalar[time.Time](t, pool, `select session_lost_at from queues.worker where worker_id = 'w-live'`)
	gate.unblock()
	_, again := ev.waitFrom(t, &from, "registered again", kindOf("w-live", EventRegistered))
	require.True(t, again.Reregistered)
	require.NotEqual(t, oldKey, scalar[int32](t, pool, `select session_key from queues.worker where worker_id = 'w-live'`))
	require.True(t, scalar[bool](t, pool, `select session_lost_at is null from queues.worker where worker_id = 'w-live'`))

	// The grace has passed since the mark, and the leader has checked since.
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select now() > $1::timestamptz + $2::interval`, marked, grace)
	}, waitTimeout, 10*time.Millisecond)
	checks := ev.len()
	ev.waitFrom(t, &checks, "a check", kindOf("w-leader", EventSessionCheck))
	ev.waitFrom(t, &checks, "another check", kindOf("w-leader", EventSessionCheck))
	for i, id := range tasks {
		require.Equal(t, leases[i], scalar[int64](t, pool,
			`select lease_id from queues.task where task_id = $1 and status = 'running'`, id), "still running under its lease")
	}
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_event where event = 'recovered'`))
	require.Zero(t, ev.count(reapedBy("w-leader", "w-live", CauseSession)))
}

// The leader's session gone, another worker takes the lease at once — with a lease of a minute
// that has not expired, only the session can explain it — with the next term, and then
// recovers the old leader's tasks by the session path.
func TestLeaderSessionGoneHandsOver(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ev := newEvents()
	gates := map[string]*sessionGate{}
	for _, id := range []string{"w-a", "w-b"} {
		cfg, g := withSession(pool, testConfig(id, ev))
		cfg.LeaderTTL = time.Minute
		cfg.LeaderPollInterval = 50 * time.Millisecond
		cfg.SessionGrace = 100 * time.Millisecond
		cfg.WorkerTimeout = time.Hour
		gates[id] = g
		start(t, pool, cfg)
	}
	from := 0
	leader, elected := ev.waitFrom(t, &from, "elected", kind(EventElected))
	other := map[string]string{"w-a": "w-b", "w-b": "w-a"}[leader]
	enqueueN(t, pool, "s", 2)
	tasks, _ := claimFor(t, pool, leader, 2)
	require.Len(t, tasks, 2)
	expires := scalar[time.Time](t, pool, `select expires_at from queues.leader`)

	gates[leader].block()
	cutSession(t, pool, leader)
	_, next := ev.waitFrom(t, &from, "the other elected", kindOf(other, EventElected))
	require.Equal(t, elected.Term+1, next.Term)
	require.True(t, scalar[bool](t, pool, `select elected_at < $1 from queues.leader where worker_id = $2`, expires, other),
		"taken before the old lease expired")
	ev.wait(t, "the old leader's tasks recovered", reapedBy(other, leader, CauseSession))
	for _, id := range tasks {
		require.Equal(t, "pending", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
	}
}

// The session path is a leader action: under a stale term, or an expired lease, it does
// nothing, even for a worker whose session is gone; under the current one, with no grace, it
// recovers that worker's tasks at once, and a second call finds nothing more.
func TestReapLostSessionsFencedByTerm(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	term := lead(t, pool, "boss")
	gone, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	_, err = registerInstance(t, gone, "w-gone", "p", true, time.Hour)
	require.NoError(t, err)
	enqueueN(t, pool, "s", 2)
	tasks, _ := claimFor(t, pool, "w-gone", 2)
	require.Len(t, tasks, 2)
	pid := gone.PgConn().PID()
	require.NoError(t, gone.Close(ctx))
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select not exists (select from pg_stat_activity where pid = $1)`, pid)
	}, waitTimeout, 5*time.Millisecond)

	for _, stale := range []int64{term - 1, term + 1} {
		reaped, err := ReapLostSessions(ctx, pool, 0, stale)
		require.NoError(t, err)
		require.Empty(t, reaped)
	}
	mustExec(t, pool, `update queues.leader set expires_at = now() - interval '1 second'`)
	reaped, err := ReapLostSessions(ctx, pool, 0, term)
	require.NoError(t, err)
	require.Empty(t, reaped, "an expired lease")
	require.Equal(t, 2, scalar[int](t, pool, `select count(*) from queues.task where status = 'running'`))

	mustExec(t, pool, `update queues.leader set expires_at = now() + interval '1 hour'`)
	reaped, err = ReapLostSessions(ctx, pool, 0, term)
	require.NoError(t, err)
	require.Len(t, reaped, 1)
	require.Equal(t, "w-gone", reaped[0].WorkerID)
	require.Equal(t, CauseSession, reaped[0].Cause)
	require.Equal(t, 2, reaped[0].TasksRecovered)
	require.False(t, reaped[0].LostAt.IsZero())
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task where status = 'running'`))
	reaped, err = ReapLostSessions(ctx, pool, 0, term)
	require.NoError(t, err)
	require.Empty(t, reaped)
	_, err = pool.Exec(ctx, `select * from queues.reap_lost_sessions(interval '-1 second', $1)`, term)
	requireCode(t, err, "22023", "_grace")
}
