package processtest_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m, dbtest.SetsOptions("core", "comms", "files", "accounts"))
}

// startWorker runs a worker with the given channel providers until the test ends.
func startWorker(t *testing.T, pool *pgxpool.Pool, channels map[string]taskorch.ChannelProvider) {
	t.Helper()
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Concurrency:     8,
		Channels:        channels,
		PollInterval:    20 * time.Millisecond,
		MaxPollInterval: 100 * time.Millisecond,
		Logger:          slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx)
	}()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { cancel(); <-done }) })
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func scalar[T any](t testing.TB, db taskorch.DBTX, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, db.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

func mustExec(t testing.TB, db taskorch.DBTX, sql string, args ...any) {
	t.Helper()
	_, err := db.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// waitTrue waits until the query answers true (the database is the signal).
func waitTrue(t *testing.T, db taskorch.DBTX, what, sql string, args ...any) {
	t.Helper()
	require.Eventually(t, func() bool { return scalar[bool](t, db, sql, args...) }, 30*time.Second, 10*time.Millisecond, what)
}

// agendas are the due tables of the processes whose supervisor runs as ticks, by root key.
var agendas = map[string]string{
	"send_email_task_id":    "comms.send_email_due",
	"send_sms_task_id":      "comms.send_sms_due",
	"file_deletion_task_id": "files.file_deletion_due",
}

// quiet waits until no task of the process whose payload has key = id is pending or running,
// and (for a process run by ticks) the instance has left its supervisor's agenda: the
// supervisor has stopped and nothing more is enqueued for it.
func quiet(t *testing.T, db taskorch.DBTX, key string, id int64) {
	t.Helper()
	waitTrue(t, db, "the process's tasks to settle",
		`select not exists (select 1 from queues.task where payload ->> $1 = $2 and status in ('pending', 'running'))`, key, strconv.FormatInt(id, 10))
	if agenda, ok := agendas[key]; ok {
		waitTrue(t, db, "the instance to leave its supervisor's agenda",
			`select not exists (select 1 from `+agenda+` where `+key+` = $1)`, id)
	}
}

// fastProcesses shortens the processes' backoff and check intervals for a test database.
func fastProcesses(t *testing.T, db taskorch.DBTX, maxAttempts int) {
	t.Helper()
	for _, table := range []string{"comms.process_config", "files.process_config", "accounts.process_config"} {
		mustExec(t, db, `update `+table+` set max_attempts = case when process = 'account_deletion' then 1 else $1 end,
			backoff_base = '50 ms', backoff_max = '200 ms', check_interval = '300 ms'`, maxAttempts)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
