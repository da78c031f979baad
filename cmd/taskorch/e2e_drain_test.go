package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// At SIGTERM a worker running a task drains: from the signal on /readyz answers 503 (a load
// balancer stops sending it webhooks, a rollout sees it leave) while the task still runs, and
// /healthz stays 200, saying "draining" (a liveness probe must not kill it mid-task). The JSON
// log line of the stop gives the grace in seconds.
func TestE2EReadinessFailsWhileDraining(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	w := startWorkerProc(t, url, "TASKORCH_HTTP_ADDR="+addr, "TASKORCH_SHUTDOWN_GRACE=10m")
	require.Eventually(t, func() bool { code, _ := get(base + "/readyz"); return code == http.StatusOK },
		30*time.Second, 20*time.Millisecond, "worker ready")
	code, body := get(base + "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)

	id := enqueue(t, pool, "taskorch.sleep", `{"ms": 600000}`, 0)
	w.waitStarted(t, id)
	stopping := w.out.lineWith(`"msg":"stopping: finishing running tasks`)
	w.signal(t, syscall.SIGTERM)
	var line string
	select {
	case line = <-stopping:
	case <-time.After(30 * time.Second):
		require.FailNow(t, "no stopping line after SIGTERM")
	}
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
	require.Equal(t, 600.0, rec["grace"], "the grace in seconds: %s", line)

	code, body = get(base + "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, "draining")
	code, body = get(base + "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "draining\n", body)
	require.Equal(t, "running", q[string](t, pool, `select status::text from queues.task where task_id = $1`, id),
		"the task still runs: the worker is draining, not gone")

	w.signal(t, syscall.SIGTERM) // the second signal cuts the grace short
	require.Equal(t, 0, w.wait(t))
	require.Equal(t, "pending", q[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
}
