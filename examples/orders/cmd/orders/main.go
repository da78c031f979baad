// Command orders runs the orders service (package orders) on DATABASE_URL: it migrates, serves
// the HTTP API on ADDR (default 127.0.0.1:8080) and runs a worker, until SIGINT or SIGTERM, then
// shuts down gracefully and closes its pool.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/examples/orders"
)

// demoGateway accepts every charge.
type demoGateway struct{}

func (demoGateway) Charge(_ context.Context, customer string, cents int64) (string, error) {
	return fmt.Sprintf("rcpt-%s-%d", customer, cents), nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close() // the pool is ours: closed after Run has closed what it opened
	if err := orders.Migrate(ctx, pool); err != nil {
		return err
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	return orders.Run(ctx, orders.RunConfig{Pool: pool, Gateway: demoGateway{}, Addr: addr, Logger: slog.Default()})
}
