package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// `taskorch tasks cancel` stops a task running in a `taskorch worker` process within a second
// (docs/worker.md, "Cancellation"), although the worker's lease renewal would not look for 100 s:
// the worker logs the cancellation at info, its built-in taskorch.sleep handler returns
// context.Canceled, and the task stays cancelled. A second task then runs in the freed slot.
func TestE2ECancelRunningTask(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	w := startWorkerProc(t, url, "TASKORCH_CONCURRENCY=1")

	id := enqueue(t, pool, "taskorch.sleep", `{"ms": 600000}`, 0)
	task := fmt.Sprintf(`"task_id":%d,`, id)
	select {
	case <-w.out.lineWith(`"msg":"task started"`, task):
	case <-time.After(time.Minute):
		t.Fatal("the task did not start")
	}
	cancelled := w.out.lineWith(`"level":"INFO"`, `"msg":"task cancelled; stopping its handler"`, task)
	stopped := w.out.lineWith(`"msg":"task stopped without an outcome"`, task)

	began := time.Now()
	r := runBinary(t, []string{"DATABASE_URL=" + url}, "tasks", "cancel", strconv.FormatInt(id, 10))
	returned := time.Now()
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, fmt.Sprintf("task %d is cancelled\n", id), r.out)
	select {
	case line := <-stopped:
		t.Logf("stopped %s after the cancel command returned (%s after it started)", time.Since(returned), time.Since(began))
		require.Less(t, time.Since(returned), time.Second)
		require.Contains(t, line, "the task was cancelled (the handler returned: context canceled)")
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop the cancelled task")
	}
	<-cancelled // logged before the handler returned

	waitStatus(t, pool, enqueue(t, pool, "taskorch.noop", `{}`, 0), "completed")
	require.Equal(t, "cancelled", q[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
	require.Equal(t, int64(0), q[int64](t, pool, `select count(*) from queues.task_history where task_id = $1 and event = 'completed'`, id))
}
