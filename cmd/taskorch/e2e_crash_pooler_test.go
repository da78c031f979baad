package main

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/pgbouncertest"
)

// Behind a real PgBouncer in transaction mode (docs/operations.md, "Crashed workers"): a
// poll-only worker has no session, and the leader's session checks (on its direct connection,
// every 250 ms) leave its tasks alone while it runs them: each completes under its first lease.
// A worker whose work goes through the pooler and whose session is its direct LISTEN connection
// is found dead by that session when it is killed.
func TestE2EPoolerWorkersAndSessions(t *testing.T) {
	t.Parallel()
	direct := dbtest.NewDBURL(t)
	pooled := pgbouncertest.Start(t, direct, pgbouncertest.Options{}).URL(direct)
	pool := openPool(t, direct)
	completionLedger(t, pool)
	leader := startWorkerProc(t, direct, "TASKORCH_WORKER_ID=leader")
	waitFor(t, pool, "the direct worker leads", `select exists (select from queues.leader where worker_id = 'leader')`)

	// Poll only: no session. The leader is stopped while it claims, so that it claims them all.
	leader.signal(t, syscall.SIGSTOP)
	pollOnly := startWorkerProc(t, pooled, "TASKORCH_POLL_ONLY=true", "TASKORCH_WORKER_ID=poll-only")
	waitFor(t, pool, "registered without a session", `select exists (select from queues.worker where worker_id = 'poll-only' and session_key is null)`)
	var ids []int64
	for range 3 {
		ids = append(ids, enqueue(t, pool, "taskorch.sleep", `{"ms": 3000}`, 0))
	}
	waitFor(t, pool, "the poll-only worker runs them", `select count(*) = 3 from queues.task where worker_id = 'poll-only' and status = 'running'`)
	leader.signal(t, syscall.SIGCONT)
	waitFor(t, pool, "completed", `select count(*) = 3 from queues.task where task_id = any ($1) and status = 'completed'`, ids)
	requireCompletedOnce(t, pool, ids)
	require.Equal(t, 3, q[int](t, pool, `select count(*) from queues.task where task_id = any ($1) and attempt = 1 and worker_id = 'poll-only'`, ids),
		"each ran once, on the poll-only worker")
	require.Zero(t, q[int](t, pool, `select count(*) from queues.task_event where task_id = any ($1)`, ids), "nothing recovered or released")
	pollOnly.signal(t, syscall.SIGTERM)
	require.Zero(t, pollOnly.wait(t))

	// Work through the pooler, the session on the direct LISTEN connection: killed, found dead.
	leader.signal(t, syscall.SIGSTOP)
	listens := startWorkerProc(t, pooled, "TASKORCH_LISTEN_DATABASE_URL="+direct, "TASKORCH_WORKER_ID=listens")
	waitFor(t, pool, "registered with a session", `select exists (select from queues.worker where worker_id = 'listens' and session_key is not null)`)
	ids = nil
	for range 3 {
		ids = append(ids, enqueue(t, pool, "taskorch.sleep", `{"ms": 15000}`, 0))
	}
	waitFor(t, pool, "the listening worker runs them", `select count(*) = 3 from queues.task where worker_id = 'listens' and status = 'running'`)
	leader.signal(t, syscall.SIGCONT)
	listens.signal(t, syscall.SIGKILL)
	listens.wait(t)
	waitFor(t, pool, "its tasks back", `select count(*) = 0 from queues.task where worker_id = 'listens' and status = 'running'`)
	rel := releasesOf(t, pool, "listens", ids)
	require.Len(t, rel, 3)
	for _, r := range rel {
		require.Equal(t, "recovered:session_lost", r.how)
	}
}
