package worker

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// transient reports whether err is worth retrying: the connection failed or the server is
// restarting, as opposed to a statement the server refused.
func transient(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // admin/crash shutdown, cannot connect now
			pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return true
		}
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	return pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed") ||
		strings.Contains(err.Error(), "unexpected EOF") || strings.Contains(err.Error(), "connection reset")
}

// outcomeContext is the context outcome writes run on: they must happen even when the task's
// own context was cancelled (a timeout), and are bounded on their own.
func outcomeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// retryDB runs fn until it succeeds, ctx ends, or it fails with an error that retrying cannot
// fix. Connection errors (a database restart) are retried with backoff.
func (w *Worker) retryDB(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	backoff := 50 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		w.log.Warn("database unavailable; retrying", "operation", what, "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}
