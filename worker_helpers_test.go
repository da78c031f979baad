package taskorch_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/tasktype"
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

func lastError(t *testing.T, db taskorch.DBTX, id int64) string {
	t.Helper()
	return scalar[string](t, db, `select error_message from queues.error where task_id = $1 order by error_id desc limit 1`, id)
}

// countingObserver counts what the tests ask of a worker's observers: the leases it found lost
// and the NOTIFY wake-ups it heard (what contrib/prometheus reports as
// taskorch_leases_lost_total and taskorch_notifications_received_total).
type countingObserver struct {
	tasktype.ObserverDefaults
	leasesLost, notifications atomic.Int64
}

func newCountingObserver() *countingObserver { return &countingObserver{} }

func (o *countingObserver) TaskFinished(_ context.Context, _ *taskorch.Task, f tasktype.TaskFinish) {
	if f.Outcome == tasktype.OutcomeLeaseLost {
		o.leasesLost.Add(1)
	}
}

func (o *countingObserver) WorkerEvent(e tasktype.WorkerEvent) {
	switch e.Kind {
	case tasktype.EventLeaseLost:
		o.leasesLost.Add(1)
	case tasktype.EventNotified:
		o.notifications.Add(1)
	}
}
