package worker

import (
	"bytes"
	"log/slog"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/tasktype"
)

// The lazy task logger writes exactly what slog's Logger.With would, groups included.
func TestTaskLogHandlerMatchesWith(t *testing.T) {
	t.Parallel()
	attrs := []any{"task_id", int64(7), "task_type", "mail", "lease_id", int64(3), "attempt", 1}
	var want, got bytes.Buffer
	base := func(b *bytes.Buffer) slog.Handler {
		return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo})
	}
	eager := slog.New(base(&want)).With(attrs...)
	lazy := slog.New(&taskLogHandler{inner: base(&got), attrs: []slog.Attr{
		slog.Int64("task_id", 7), slog.String("task_type", "mail"), slog.Int64("lease_id", 3), slog.Int("attempt", 1)}})
	for _, l := range []*slog.Logger{eager, lazy} {
		l.Debug("not written")
		l.Warn("task failed", "error", "boom")
		l.With("db_function", "billing.close").Info("ran", "ms", 3)
		l.WithGroup("provider").Info("called", "status", 503)
	}
	ts := regexp.MustCompile(`"time":"[^"]+",`)
	require.Equal(t, ts.ReplaceAllString(want.String(), ""), ts.ReplaceAllString(got.String(), ""))
	require.Contains(t, got.String(), `"task_id":7,"task_type":"mail","lease_id":3,"attempt":1,"db_function":"billing.close","ms":3`)
}

func BenchmarkTaskLogger(b *testing.B) {
	w := &Worker{log: slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil))}
	lease := int64(3)
	task := &tasktype.Task{ID: 7, Type: "mail", LeaseID: &lease, Attempt: 1}
	b.Run("lazy", func(b *testing.B) {
		for b.Loop() {
			w.taskLogger(task).Debug("task started")
		}
	})
	b.Run("with", func(b *testing.B) {
		for b.Loop() {
			w.log.With("task_id", task.ID, "task_type", task.Type, "lease_id", *task.LeaseID, "attempt", task.Attempt).Debug("task started")
		}
	})
}
