package transportsuite_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

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

func raw(typ, payload string) taskorch.RawArgs {
	return taskorch.RawArgs{Type: typ, Payload: []byte(payload)}
}

// waitProgress waits until count() reaches want, failing t (with msg) when it stays the same for
// stall: a test of "nothing lost" that does not fail on a slow machine, only on a stuck one.
func waitProgress(t testing.TB, stall time.Duration, want int64, msg string, count func() int64) {
	t.Helper()
	last, since := int64(-1), time.Now()
	for {
		n := count()
		if n == want {
			return
		}
		if n > want {
			t.Fatalf("%s: %d, more than %d", msg, n, want)
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > stall {
			t.Fatalf("%s: stuck at %d of %d for %s", msg, n, want, stall)
		}
		time.Sleep(100 * time.Millisecond) //nolint:forbidigo // polling the database's count
	}
}

// explainUnfinished, when t fails, logs every task not completed: its row's delivery state and
// its events, to tell a lost message from a stuck claim or a stalled worker.
func explainUnfinished(t *testing.T, db taskorch.DBTX) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		rows, err := db.Query(context.Background(), `select format('task %s (%s) %s attempt %s: run_at %s ago, dispatched %s ago for lease %s, lease %s of %s; events: %s',
				t.task_id, t.task_type, t.status, t.attempt, now() - t.run_at, now() - t.dispatched_at,
				t.dispatch_lease_id, t.lease_id, t.worker_id,
				(select string_agg(format('%s %s ago by %s (%s)', e.event, now() - e.occurred_at, e.worker_id, e.detail), '; ' order by e.task_event_id)
				 from queues.task_event e where e.task_id = t.task_id))
			from queues.task t where t.status <> 'completed' order by t.task_id limit 20`)
		if err != nil {
			t.Logf("explaining the unfinished tasks: %v", err)
			return
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Logf("explaining the unfinished tasks: %v", err)
		}
		for _, l := range lines {
			t.Log(l)
		}
	})
}

// quiet is a logger that writes nothing, for benchmarks.
var quiet = slog.New(slog.DiscardHandler)
