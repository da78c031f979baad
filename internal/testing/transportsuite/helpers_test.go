package transportsuite_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

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

// quiet is a logger that writes nothing, for benchmarks.
var quiet = slog.New(slog.DiscardHandler)
