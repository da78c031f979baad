package dbtest

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/migrate"
)

// CoreOptions makes the template database with taskorch's core migrations, for the packages
// whose tests need the queues schema:
//
//	func TestMain(m *testing.M) { dbtest.Main(m, dbtest.CoreOptions()) }
func CoreOptions() Options { return SetsOptions("core") }

// SetsOptions makes the template database with the given migration sets applied in order
// (e.g. "core", "comms", "files", "accounts"), for the packages that test processes.
func SetsOptions(sets ...string) Options {
	ms, err := migrate.Shipped(sets...)
	if err != nil {
		panic(err) // the embedded migrations are part of the binary
	}
	return Options{
		Fingerprint: migrate.Fingerprint(ms),
		Migrate: func(ctx context.Context, conn *pgx.Conn) error {
			_, err := migrate.Up(ctx, conn, ms)
			return err
		},
	}
}
