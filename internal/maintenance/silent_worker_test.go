package maintenance

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Only a session that is gone releases anything by the session path. A worker without a
// session (PollOnly, behind a transaction pooler) and a stopped one (SIGSTOP: silent, its
// session alive on the server) keep their tasks through the leader's checks, even with no
// grace at all; the heartbeat path still finds both once they are silent past the timeout.
func TestSessionPathSparesSilentWorkers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	ev := newEvents()
	lcfg, _ := withSession(pool, testConfig("w-leader", ev))
	lcfg.WorkerTimeout = time.Hour
	lcfg.SessionGrace = NoGrace
	leader := start(t, pool, lcfg)
	ev.wait(t, "elected", kindOf("w-leader", EventElected))

	_, err := registerInstance(t, pool, "w-poll-only", "p1", false, time.Hour)
	require.NoError(t, err)
	stopped, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = stopped.Close(ctx) })
	_, err = registerInstance(t, stopped, "w-stopped", "p2", true, time.Hour)
	require.NoError(t, err)
	enqueueN(t, pool, "s", 4)
	pollTasks, _ := claimFor(t, pool, "w-poll-only", 2)
	stoppedTasks, _ := claimFor(t, pool, "w-stopped", 2)
	require.Len(t, append(pollTasks, stoppedTasks...), 4)
	mustExec(t, pool, `update queues.worker set last_heartbeat = now() - interval '10 minutes' where worker_id <> 'w-leader'`)

	from := ev.len()
	for range 5 {
		ev.waitFrom(t, &from, "a session check", kindOf("w-leader", EventSessionCheck))
	}
	require.Equal(t, 4, scalar[int](t, pool, `select count(*) from queues.task where status = 'running'`))
	require.Equal(t, 3, scalar[int](t, pool, `select count(*) from queues.worker`))
	require.Zero(t, ev.count(func(_ string, e Event) bool { return e.Kind == EventReaped && len(e.Workers) > 0 }))

	reaped, err := ReapDeadWorkers(ctx, pool, 5*time.Minute, leader.Term())
	require.NoError(t, err)
	require.Len(t, reaped, 2)
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task where status = 'running'`))
	require.Equal(t, 4, scalar[int](t, pool, `select count(*) from queues.error where context->>'cause' = 'heartbeat_timeout'`))
}
