package dashboard

import (
	"log/slog"
	"net/http"
	"time"
)

// The access log (Config.AccessLog): one info line per request once it is answered.

// accessKey keys a request's accessEntry in its context, for withIdentity to say who made it.
type accessKey struct{}

// accessEntry is what the access log line says of a request, filled while it is served.
type accessEntry struct {
	who    identity
	status int
	bytes  int64
}

// accessWriter records the status and size of a response.
type accessWriter struct {
	http.ResponseWriter
	e *accessEntry
}

func (w *accessWriter) WriteHeader(status int) {
	if w.e.status == 0 {
		w.e.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *accessWriter) Write(b []byte) (int, error) {
	if w.e.status == 0 {
		w.e.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.e.bytes += int64(n)
	return n, err
}

// Flush passes on to the writer beneath, for the pages that stream.
func (w *accessWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer beneath.
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeAccessLine logs the answered request.
func (h *Handler) writeAccessLine(r *http.Request, e *accessEntry, began time.Time) {
	status := e.status
	if status == 0 {
		status = http.StatusOK
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
		slog.Int64("bytes", e.bytes), slog.Duration("duration", time.Since(began)), slog.String("remote", r.RemoteAddr),
	}
	if e.who != "" {
		attrs = append(attrs, slog.String("actor", e.who.actor()))
	}
	h.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}
