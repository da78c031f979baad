package main

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/redistest"
	"github.com/taskorch/taskorch/internal/testing/sqstest"
)

// transportEnv starts the test's Redis or local SQS server and returns the worker's environment
// for it. The SQS worker runs the real AWS SDK against the local server, with placeholder
// credentials (the server does not check signatures) and no instance-metadata lookups.
func transportEnv(t *testing.T, name string) []string {
	t.Helper()
	switch name {
	case "redis":
		srv := redistest.Start(t)
		return []string{"TASKORCH_TRANSPORT=redis", "TASKORCH_REDIS_URL=" + srv.URL(0)}
	case "sqs":
		srv := sqstest.Start(t)
		queue := srv.CreateQueue("tasks", 30*time.Second)
		return []string{"TASKORCH_TRANSPORT=sqs", "TASKORCH_SQS_QUEUE_URL=" + queue, "TASKORCH_SQS_ENDPOINT=" + srv.URL,
			"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true"}
	}
	t.Fatalf("unknown transport %q", name)
	return nil
}

// metricValue reads one sample from a worker's /metrics (0 when absent).
func metricValue(t *testing.T, base, sample string) float64 {
	t.Helper()
	code, body := get(base + "/metrics")
	require.Equal(t, 200, code)
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}

// Under each transport, a worker process killed with SIGKILL in the middle of a task: the task
// is recovered (its lease expires; it is dispatched again) and completed exactly once, by the
// worker that took over, through the transport.
func TestE2ETransportCrashRecovery(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"redis", "sqs"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := dbtest.NewDBURL(t)
			pool := openPool(t, url)
			env := append(transportEnv(t, name), "TASKORCH_LEASE_DURATION=2s", "TASKORCH_REDISPATCH_AFTER=1s", "TASKORCH_CONCURRENCY=4")

			first := startWorkerProc(t, url, append(env, "TASKORCH_WORKER_ID=first")...)
			id := enqueue(t, pool, "taskorch.sleep", `{"ms": 1500}`, 0)
			waitFor(t, pool, "the task is running on the first worker",
				`select status = 'running' and worker_id = 'first' from queues.task where task_id = $1`, id)
			first.signal(t, syscall.SIGKILL)
			first.wait(t)

			port := freePort(t)
			startWorkerProc(t, url, append(env, "TASKORCH_WORKER_ID=second", fmt.Sprintf("TASKORCH_HTTP_ADDR=127.0.0.1:%d", port))...)
			var more []int64
			for range 20 {
				more = append(more, enqueue(t, pool, "taskorch.noop", `{}`, 0))
			}
			waitStatus(t, pool, id, "completed")
			for _, m := range more {
				waitStatus(t, pool, m, "completed")
			}

			require.True(t, q[bool](t, pool, `select t.lease_id = (select max(l.task_lease_id) from queues.task_lease l where l.task_id = t.task_id)
				from queues.task t where t.task_id = $1`, id), "completed under its newest lease, the second worker's")
			require.Equal(t, []string{"first", "second"}, q[[]string](t, pool,
				`select array_agg(worker_id order by task_lease_id) from queues.task_lease where task_id = $1`, id))
			require.Equal(t, "second", q[string](t, pool, `select worker_id from queues.task where task_id = $1`, id))
			require.Equal(t, name, q[string](t, pool, `select transport from queues.worker where worker_id = 'second'`))

			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			label := fmt.Sprintf(`{transport=%q}`, name)
			require.GreaterOrEqual(t, metricValue(t, base, "taskorch_transport_messages_received_total"+label), float64(21),
				"the tasks came through the transport")
			require.Zero(t, metricValue(t, base, "taskorch_transport_fallback"+label), "no fallback to polling")
		})
	}
}
