package redisstream_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/transport/redisstream"
)

// A worker that receives task ids from Redis Streams instead of polling PostgreSQL. The
// transport is made, and its URL checked, before the worker; the worker opens it with its id
// and a hold derived from its lease when it runs, and closes it when it stops. (Not run by go
// test: it needs a Redis server.)
func ExampleNew_worker() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	tr, err := redisstream.New(redisstream.Config{URL: os.Getenv("REDIS_URL")}) // redis://[user:password@]host:port[/db]
	if err != nil {
		log.Fatal(err) // empty or malformed: the password is never quoted
	}
	hs := taskorch.NewHandlers()
	hs.HandleFunc("send_report", func(ctx context.Context, task *taskorch.Task) error {
		log.Printf("report %s", task.Payload)
		return nil
	})
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Handlers: hs, Transport: tr})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
