package taskorch

import (
	"errors"
	"net"
	"strings"

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
