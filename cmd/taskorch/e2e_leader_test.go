package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Settings that make leadership and reaping fast enough to test.
var fastMaintenance = []string{
	"TASKORCH_HEARTBEAT_INTERVAL=200ms", "TASKORCH_WORKER_TIMEOUT=1s", "TASKORCH_LEADER_TTL=1s",
}

// Two workers: one leader at a time. Killing the leader hands leadership over within the lease,
// and a periodic schedule goes on ticking across the handover, each tick enqueued once and none
// missing: the new leader catches up the ticks of the handover.
func TestE2ELeaderHandover(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	r := run(t, "schedules", "add", "every-second", "@every 1s", "taskorch.noop", `{"from": "schedule"}`, "--database-url", url)
	require.Equal(t, 0, r.code, r.err)

	a := startWorkerProc(t, url, append(fastMaintenance, "TASKORCH_WORKER_ID=a")...)
	b := startWorkerProc(t, url, append(fastMaintenance, "TASKORCH_WORKER_ID=b")...)
	waitFor(t, pool, "a leader", `select exists (select from queues.leader where worker_id in ('a', 'b') and expires_at > now())`)
	waitFor(t, pool, "ticks before the handover", `select count(*) >= 2 from queues.task where payload->>'from' = 'schedule'`)

	leader := q[string](t, pool, `select worker_id from queues.leader`)
	term := q[int64](t, pool, `select term from queues.leader`)
	other := map[string]string{"a": "b", "b": "a"}[leader]
	procs := map[string]*proc{"a": a, "b": b}
	procs[leader].signal(t, syscall.SIGKILL)
	procs[leader].wait(t)
	before := q[int64](t, pool, `select count(*) from queues.task where payload->>'from' = 'schedule'`)

	waitFor(t, pool, "the other worker leads", `select worker_id = $1 and term > $2 from queues.leader`, other, term)
	waitFor(t, pool, "ticks after the handover", `select count(*) >= $1 + 2 from queues.task where payload->>'from' = 'schedule'`, before)
	require.Equal(t,
		q[int64](t, pool, `select count(distinct idempotency_key) from queues.task where payload->>'from' = 'schedule'`),
		q[int64](t, pool, `select count(*) from queues.task where payload->>'from' = 'schedule'`),
		"each tick enqueued once")
	requireTicksContiguous(t, pool, "schedule", time.Second)
	waitFor(t, pool, "the dead worker reaped", `select not exists (select from queues.worker where worker_id = $1)`, leader)

	r = run(t, "workers", "list", "--database-url", url)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^`+other+`\s+\S+\s+active\s+yes\s+10\s+`, r.out)
}

// A worker that stops heartbeating (paused) is reaped by the leader, and its running task goes
// back to pending and is run by another worker, long before its 5-minute lease would expire. Its
// session stays alive while it is stopped: the heartbeat path finds it, not the session path.
func TestE2EOrphanRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	stuck := startWorkerProc(t, url, append(fastMaintenance, "TASKORCH_WORKER_ID=stuck", "TASKORCH_LEASE_DURATION=5m")...)
	id := enqueue(t, pool, "taskorch.sleep", `{"ms": 3000}`, 0)
	waitFor(t, pool, "claimed by the stuck worker", `select coalesce(worker_id = 'stuck', false) and status = 'running' from queues.task where task_id = $1`, id)
	stuck.signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { _ = stuck.cmd.Process.Signal(syscall.SIGCONT) })

	startWorkerProc(t, url, append(fastMaintenance, "TASKORCH_WORKER_ID=healthy")...)
	waitStatus(t, pool, id, "completed")
	require.Equal(t, "healthy", q[string](t, pool, `select worker_id from queues.task where task_id = $1`, id))
	require.Equal(t, "recovered", q[string](t, pool, `select event from queues.task_event where task_id = $1 and event = 'recovered'`, id))
	require.True(t, q[bool](t, pool, `select exists (select from queues.error where task_id = $1 and error_message like '%stuck%')`, id))
	require.Equal(t, "heartbeat_timeout", q[string](t, pool, `select context->>'cause' from queues.error where task_id = $1 and context->>'operation' = 'recovered'`, id))
	_, err := pool.Exec(ctx, `select 1`)
	require.NoError(t, err)
}
