package taskorch_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Every JSON log line about a task names it, its type, its lease and the worker: through a
// failure, a snooze and a success, and a lease lost under a running task.
func TestWorkerTaskLogLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	var buf lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))

	var runs atomic.Int32
	started := make(chan struct{}, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("steps", func(context.Context, *taskorch.Task) error {
		switch runs.Add(1) {
		case 1:
			return errors.New("first attempt fails")
		case 2:
			return taskorch.Snooze(time.Millisecond)
		}
		return nil
	})
	hs.HandleFunc("blocks", func(ctx context.Context, _ *taskorch.Task) error {
		started <- struct{}{}
		<-ctx.Done()
		return nil // reported as success after the lease is gone: refused
	})
	w, stop := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Logger: logger, LeaseDuration: time.Second})

	steps, err := c.Enqueue(ctx, raw("steps", `{}`), nil)
	require.NoError(t, err)
	waitStatus(t, pool, steps.TaskID, taskorch.StatusCompleted)
	blocks, err := c.Enqueue(ctx, raw("blocks", `{}`), &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)
	<-started
	_, err = c.Cancel(ctx, blocks.TaskID)
	require.NoError(t, err)
	stop()

	linesAbout := func(id int64) []map[string]any {
		var out []map[string]any
		sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
			if line["task_id"] == float64(id) {
				out = append(out, line)
			}
		}
		require.NoError(t, sc.Err())
		return out
	}
	check := func(id int64, typ string, wantMsgs ...string) {
		lines := linesAbout(id)
		var msgs []string
		for _, l := range lines {
			msgs = append(msgs, l["msg"].(string))
			require.Equal(t, typ, l["task_type"], "%v", l)
			require.Equal(t, w.ID(), l["worker_id"], "%v", l)
			require.IsType(t, float64(0), l["lease_id"], "%v", l)
			require.Positive(t, l["lease_id"], "%v", l)
		}
		for _, m := range wantMsgs {
			require.Contains(t, msgs, m)
		}
	}
	check(steps.TaskID, "steps", "task started", "task failed", "task snoozed", "task finished")
	require.Len(t, linesAbout(steps.TaskID), 8, "3 attempts: started and finished each, a failure and a snooze")
	check(blocks.TaskID, "blocks", "task started", "task cancelled; stopping its handler", "completion refused: the lease was lost", "task finished")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}
