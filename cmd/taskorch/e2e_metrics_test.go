package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/pgcluster"
)

// The worker's /metrics after a known workload holds exact counts; /readyz fails while the
// database is down and recovers after it is back, while /healthz answers throughout.
func TestE2EMetricsAndReadiness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := privateClusterConfig(t)
	cluster, err := pgcluster.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })
	url := cluster.URL("postgres")

	pool := openPool(t, url)
	_, err = taskorch.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `update queues.settings set retry_backoff_max = interval '0'`)
	require.NoError(t, err)

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startWorkerProc(t, url, "TASKORCH_HTTP_ADDR="+addr, "TASKORCH_CONCURRENCY=4")
	base := "http://" + addr
	require.Eventually(t, func() bool { code, _ := get(base + "/readyz"); return code == http.StatusOK },
		30*time.Second, 20*time.Millisecond, "worker ready")

	unknown := enqueue(t, pool, "nobody.handles.this", `{}`, 0) // first in claim order: passed over
	for range 5 {
		enqueue(t, pool, "taskorch.noop", `{}`, 0)
	}
	fails := enqueue(t, pool, "taskorch.fail", `{}`, 3)
	waitFor(t, pool, "noops completed", `select count(*) = 5 from queues.task where task_type = 'taskorch.noop' and status = 'completed'`)
	waitStatus(t, pool, fails, "dead")
	require.Equal(t, "pending 0", q[string](t, pool, `select format('%s %s', status, attempt) from queues.task where task_id = $1`, unknown),
		"no worker claims it")

	want := []string{
		`taskorch_tasks_claimed_total{task_type="taskorch.noop"} 5`,
		`taskorch_tasks_claimed_total{task_type="taskorch.fail"} 3`,
		`taskorch_tasks_completed_total{task_type="taskorch.noop"} 5`,
		`taskorch_tasks_failed_total{outcome="retry",task_type="taskorch.fail"} 2`,
		`taskorch_tasks_failed_total{outcome="dead",task_type="taskorch.fail"} 1`,
		`taskorch_queue_unserved{task_type="nobody.handles.this"} 1`, // the leader's sample
		`taskorch_task_duration_seconds_count{task_type="taskorch.noop"} 5`,
		`taskorch_leases_lost_total 0`,
		`taskorch_completions_refused_total 0`,
	}
	var body string
	require.Eventually(t, func() bool {
		var code int
		code, body = get(base + "/metrics")
		if code != http.StatusOK {
			return false
		}
		for _, line := range want {
			if !hasLine(body, line) {
				return false
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "metrics")
	for _, line := range want {
		require.True(t, hasLine(body, line), "want %q in\n%s", line, body)
	}
	require.True(t, hasLine(body, `taskorch_tasks_completed_total{task_type="taskorch.fail"} 0`),
		"a handled type's series is served from the start, at 0")
	for _, family := range []string{"taskorch_leader ", "taskorch_db_pool_max_conns ", "go_goroutines ", "process_resident_memory_bytes "} {
		require.Contains(t, body, "\n"+family, "the Go and process collectors and the worker's own")
	}

	require.NoError(t, cluster.Stop(ctx))
	require.Eventually(t, func() bool {
		code, _ := get(base + "/readyz")
		return code == http.StatusServiceUnavailable
	}, 30*time.Second, 20*time.Millisecond, "/readyz fails while the database is down")
	code, _ := get(base + "/healthz")
	require.Equal(t, http.StatusOK, code, "the process lives")

	cluster, err = pgcluster.Start(ctx, cfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		code, _ := get(base + "/readyz")
		return code == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "/readyz recovers with the database")
	code, _ = get(base + "/metrics")
	require.Equal(t, http.StatusOK, code)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// get returns the status code and body, or 0 when the request failed.
func get(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func hasLine(body, line string) bool {
	return strings.HasPrefix(body, line+"\n") || strings.Contains(body, "\n"+line+"\n")
}
