package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/pgbouncertest"
)

// Through a real PgBouncer in transaction mode (docs/operations.md, "Production topology"): the
// operator's commands and the dashboard work on DATABASE_URL as given (no prepared statements),
// a worker works with --poll-only or with a direct LISTEN connection, and a LISTEN URL through
// the pooler is refused.

func TestE2EPoolerCommandsAndDashboard(t *testing.T) {
	t.Parallel()
	direct := dbtest.NewDBURL(t)
	pooled := pgbouncertest.Start(t, direct, pgbouncertest.Options{PoolSize: 2}).URL(direct)

	mustRun := func(args ...string) string {
		t.Helper()
		r := run(t, append(args, "--database-url", pooled)...)
		require.Equal(t, exitOK, r.code, "taskorch %s: %s", strings.Join(args, " "), r.err)
		return r.out
	}
	mustRun("migrate", "up")
	var ids []string
	for i := range 3 {
		ids = append(ids, strings.TrimSpace(mustRun("enqueue", "pooled.cli", fmt.Sprintf(`{"n": %d}`, i))))
	}
	// The same statements again and again, on server connections other commands used before:
	// a named prepared statement would collide or be missing here.
	for range 3 {
		require.Contains(t, mustRun("tasks", "list"), "pooled.cli")
		mustRun("tasks", "show", ids[0])
		mustRun("queues", "list")
		mustRun("workers", "list")
		mustRun("limits", "list")
		mustRun("schedules", "list")
	}
	mustRun("tasks", "cancel", ids[2])

	g := &globals{databaseURL: pooled}
	pool, err := g.connect(t.Context())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d, err := startDashboard(t.Context(), pool, dashboardOptions{Addr: "127.0.0.1:0", Token: "a-token-for-the-pooler-test"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Stop(t.Context()) })
	for range 2 {
		for _, page := range []string{"", "tasks", "tasks/" + ids[0], "dead", "queues", "processes", "limits", "workers", "schedules", "outbox"} {
			require.Equal(t, http.StatusOK, httpGet(t, d.URL+page, "a-token-for-the-pooler-test"), "GET /%s through the pooler", page)
		}
	}
}

func TestE2EPoolerWorkers(t *testing.T) {
	t.Parallel()
	direct := dbtest.NewDBURL(t)
	pooled := pgbouncertest.Start(t, direct, pgbouncertest.Options{}).URL(direct)
	pool := openPool(t, direct)

	// Poll only: every statement through the pooler.
	startWorkerProc(t, pooled, "TASKORCH_POLL_ONLY=true", "TASKORCH_WORKER_ID=poll-only")
	first := enqueue(t, pool, "taskorch.noop", `{}`, 0)
	waitStatus(t, pool, first, "completed")

	// A LISTEN URL through the pooler cannot hear the pool's NOTIFY: refused at start.
	refused := startWorkerProc(t, pooled, "TASKORCH_LISTEN_DATABASE_URL="+pooled, "TASKORCH_WORKER_ID=refused")
	require.Equal(t, exitFailure, refused.wait(t))
	require.Contains(t, refused.out.String(), "transaction-pooling proxy")

	// Work through the pooler, LISTEN on a direct connection: woken by NOTIFY, not by polling.
	startWorkerProc(t, pooled, "TASKORCH_LISTEN_DATABASE_URL="+direct, "TASKORCH_WORKER_ID=listens")
	waitFor(t, pool, "the listening worker registered", `select exists (select from queues.worker where worker_id = 'listens')`)
	ids := make([]int64, 20)
	for i := range ids {
		ids[i] = enqueue(t, pool, "taskorch.noop", `{}`, 0)
	}
	for _, id := range ids {
		waitStatus(t, pool, id, "completed")
	}
	require.Zero(t, q[int64](t, pool, `select count(*) from queues.error`), "no refusal, no error")
	require.True(t, q[bool](t, pool, `select not exists (select from queues.worker where worker_id = 'refused')`))
}
