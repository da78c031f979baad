package prometheus_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	taskorchprom "github.com/taskorch/taskorch/contrib/prometheus"
)

// A task running past its type's threshold is logged as a warning once and counted in
// taskorch_tasks_running_long_total; taskorch_task_running_longest_seconds shows how long the
// longest of each type has run while it runs, and nothing once it is done. A type whose handler
// says WarnAfter < 0 is never warned about, though it runs past the worker's default; a type
// named in WarnRunningAfterTypes has its own threshold.
func TestRunningLongWarning(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, pool := newClient(t)
	reg := prometheus.NewRegistry()
	logs := &lockedBuffer{}
	started := make(chan string, 4)
	release := map[string]chan struct{}{"slow": make(chan struct{}), "quiet": make(chan struct{}), "own": make(chan struct{})}
	hs := taskorch.NewHandlers()
	block := func(ctx context.Context, task *taskorch.Task) error {
		started <- task.Type
		select {
		case <-release[task.Type]:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	hs.HandleFunc("slow", block)
	hs.HandleFunc("quiet", block, &taskorch.HandlerOpts{WarnAfter: -1})
	hs.HandleFunc("own", block)
	startWorker(t, pool, &taskorch.WorkerConfig{
		Handlers: hs, Concurrency: 4, Observers: []taskorch.Observer{taskorchprom.New(reg)},
		WarnRunningAfter:      100 * time.Millisecond,
		WarnRunningAfterTypes: map[string]time.Duration{"own": time.Hour},
		Logger:                slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})

	// "quiet" and "own" start first: had they a 100 ms timer, it would fire before slow's.
	enqueue := func(typ string) int64 {
		res, err := client.Enqueue(ctx, raw(typ, `{}`), nil)
		require.NoError(t, err)
		require.Equal(t, typ, <-started)
		return res.TaskID
	}
	quietID, ownID := enqueue("quiet"), enqueue("own")
	slowID := enqueue("slow")
	require.Eventually(t, func() bool {
		return gather(t, reg)[`taskorch_tasks_running_long_total{task_type="slow"}`] == 1
	}, 20*time.Second, 10*time.Millisecond)
	got := gather(t, reg)
	require.GreaterOrEqual(t, got[`taskorch_task_running_longest_seconds{task_type="slow"}`], 0.1)
	require.Contains(t, got, `taskorch_task_running_longest_seconds{task_type="quiet"}`, "running, so shown")
	require.Contains(t, got, `taskorch_task_running_longest_seconds{task_type="own"}`)

	for _, typ := range []string{"slow", "quiet", "own"} {
		close(release[typ])
	}
	for _, id := range []int64{quietID, ownID, slowID} {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	got = gather(t, reg)
	require.Equal(t, 1.0, got[`taskorch_tasks_running_long_total{task_type="slow"}`], "once per attempt")
	require.Zero(t, got[`taskorch_tasks_running_long_total{task_type="quiet"}`])
	require.Zero(t, got[`taskorch_tasks_running_long_total{task_type="own"}`])
	require.Zero(t, countPrefix(got, "taskorch_task_running_longest_seconds"), "nothing runs")

	warnings := logs.lines("task running longer than expected")
	require.Len(t, warnings, 1, logs.String())
	require.Contains(t, warnings[0], `"task_type":"slow"`)
	require.Contains(t, warnings[0], `"level":"WARN"`)
	require.Contains(t, warnings[0], `"warn_after":`)
}

func TestWarnRunningAfterRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	for _, c := range []struct {
		cfg  taskorch.WorkerConfig
		want string
	}{
		{taskorch.WorkerConfig{WarnRunningAfter: -time.Second}, "warn-running-after must not be negative"},
		{taskorch.WorkerConfig{WarnRunningAfterTypes: map[string]time.Duration{"a b": time.Second}}, `task type "a b" is malformed`},
		{taskorch.WorkerConfig{WarnRunningAfterTypes: map[string]time.Duration{"email": 0}}, "warn-running-after for email must not be 0"},
	} {
		_, err := taskorch.NewWorker(pool, &c.cfg)
		require.ErrorIs(t, err, taskorch.ErrInvalidInput)
		require.ErrorContains(t, err, c.want)
	}
}

// lockedBuffer collects a worker's JSON log lines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) lines(msg string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, `"msg":"`+msg+`"`) {
			out = append(out, l)
		}
	}
	return out
}
