package worker

import (
	"context"
	"log/slog"

	"github.com/taskorch/taskorch/internal/redact"
)

// logValue masks the secrets of a message (internal/redact: URL passwords, key=value secrets)
// and shortens it for a log line; the full message is in queues.error.
func logValue(s string) string { return truncate(redact.String(s), 512) }

// taskLogHandler adds a task's attributes to the records of the worker's logger, lazily: a
// worker runs tens of thousands of tasks a second and most of them log nothing at the configured
// level, so the attributes are only formatted when a record is actually handled (slog's own
// Logger.With formats them up front, for every task).
type taskLogHandler struct {
	inner slog.Handler
	attrs []slog.Attr
}

func (h *taskLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

// Handle passes the record on with the task's attributes first, as Logger.With would.
func (h *taskLogHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *taskLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	all := make([]slog.Attr, 0, len(h.attrs)+len(attrs))
	return &taskLogHandler{inner: h.inner, attrs: append(append(all, h.attrs...), attrs...)}
}

// WithGroup applies the attributes so far outside the group, as Logger.With would have.
func (h *taskLogHandler) WithGroup(name string) slog.Handler {
	return h.inner.WithAttrs(h.attrs).WithGroup(name)
}
