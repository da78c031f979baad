package maintenance

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A worker registers with its Config, writes one UPDATE of its row per heartbeat and nothing else
// to queues.worker, takes the leader lease, and is gone after Run returns.
func TestRegistryAndHeartbeats(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	// Count the row updates on queues.worker, by a trigger of the test's own.
	mustExec(t, pool, `create table worker_updates (worker_id text, at timestamptz default clock_timestamp())`)
	mustExec(t, pool, `create function count_worker_update() returns trigger language plpgsql as $$
		begin insert into public.worker_updates (worker_id) values (new.worker_id); return null; end $$`)
	mustExec(t, pool, `create trigger count_update after update on queues.worker
		for each row execute function count_worker_update()`)

	ev := newEvents()
	cfg := testConfig("w-registry", ev)
	cfg.TaskTypes = []string{"a", "b"}
	r := start(t, pool, cfg)

	ev.wait(t, "registered", kind(EventRegistered))
	from := 0
	for range 5 {
		ev.waitFrom(t, &from, "heartbeat", kind(EventHeartbeat))
	}
	ev.wait(t, "elected", kind(EventElected))

	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.worker`))
	var w struct {
		id, hostname, version, transport string
		pid, poolSize                    int
		taskTypes                        []string
		startedAt, lastHeartbeat         time.Time
	}
	require.NoError(t, pool.QueryRow(t.Context(), `select worker_id, hostname, version, transport, pid, pool_size,
		task_types, started_at, last_heartbeat from queues.worker`).Scan(&w.id, &w.hostname, &w.version, &w.transport,
		&w.pid, &w.poolSize, &w.taskTypes, &w.startedAt, &w.lastHeartbeat))
	require.Equal(t, "w-registry", w.id)
	require.Equal(t, "testhost", w.hostname)
	require.Equal(t, 4242, w.pid)
	require.Equal(t, 8, w.poolSize)
	require.Equal(t, "test", w.version)
	require.Equal(t, "postgres", w.transport)
	require.Equal(t, []string{"a", "b"}, w.taskTypes)
	require.GreaterOrEqual(t, w.lastHeartbeat, w.startedAt)
	require.True(t, scalar[bool](t, pool, `select worker_id = 'w-registry' and expires_at > now() from queues.leader`),
		"holds the leader lease")

	r.stop(t)
	beats := ev.count(kind(EventHeartbeat))
	// A heartbeat that timed out on a loaded machine may have committed all the same.
	timedOut := ev.count(func(_ string, e Event) bool { return e.Kind == EventError && e.Op == "heartbeat" })
	updates := scalar[int](t, pool, `select count(*) from worker_updates where worker_id = 'w-registry'`)
	// One UPDATE per heartbeat (the last one may have committed as the context was cancelled).
	require.GreaterOrEqual(t, updates, beats)
	require.LessOrEqual(t, updates, beats+timedOut+1)

	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.worker`), "deregistered at shutdown")
	require.True(t, scalar[bool](t, pool, `select worker_id is null and expires_at <= now() from queues.leader`),
		"resigned at shutdown")
	require.Equal(t, 1, ev.count(kind(EventDeposed)))
}

// A worker whose row disappeared (a leader reaped it) registers again at its next heartbeat.
func TestHeartbeatRegistersAgainAfterReap(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ev := newEvents()
	start(t, pool, testConfig("w-again", ev))
	ev.wait(t, "heartbeat", kind(EventHeartbeat))

	mustExec(t, pool, `delete from queues.worker where worker_id = 'w-again'`)
	_, e := ev.wait(t, "registered again", func(_ string, e Event) bool { return e.Kind == EventRegistered && e.Reregistered })
	require.True(t, e.Reregistered)
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.worker where worker_id = 'w-again'`))
}

// The loops outlive their connections being killed (as in a database restart) and recover.
func TestSurvivesLostConnections(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ev := newEvents()
	r := start(t, pool, testConfig("w-survivor", ev))
	ev.wait(t, "elected", kind(EventElected))

	for range 3 {
		n := ev.count(kind(EventHeartbeat))
		mustExec(t, pool, `select pg_terminate_backend(pid) from pg_stat_activity
			where datname = current_database() and pid <> pg_backend_pid()`)
		require.Eventually(t, func() bool { return ev.count(kind(EventHeartbeat)) >= n+3 }, waitTimeout, 5*time.Millisecond)
	}
	require.Eventually(t, r.IsLeader, waitTimeout, 10*time.Millisecond)
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.worker`))
}

func TestNewWorkerID(t *testing.T) {
	t.Parallel()
	a, b := NewWorkerID("host", 12), NewWorkerID("host", 12)
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, "host-12-"), a)
	require.Len(t, a, len("host-12-")+8)
}
