package transportsuite_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// startWorker runs a worker until the test ends (or the returned stop is called).
func startWorker(t *testing.T, pool *pgxpool.Pool, cfg *taskorch.WorkerConfig) (w *taskorch.Worker, stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
		cfg.MaxPollInterval = 200 * time.Millisecond
	}
	w, err := taskorch.NewWorker(pool, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return w, stop
}

// testLogger sends the worker's logs to the test's log, shown when a test fails.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// waitStatus waits until the task has the status (the database is the signal).
func waitStatus(t *testing.T, db taskorch.DBTX, id int64, status taskorch.Status) {
	t.Helper()
	var last string
	require.Eventually(t, func() bool {
		last = scalar[string](t, db, `select status::text from queues.task where task_id = $1`, id)
		return last == string(status)
	}, 20*time.Second, 5*time.Millisecond, "task %d: want %s", id, status)
}
