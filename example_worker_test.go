package taskorch_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/taskorch/taskorch"
)

// A worker runs typed Go handlers: it claims each task, decodes its payload, runs the handler
// and records the outcome. Here a report fails once and is retried after the delay its
// handler's options ask for, then completes.
func Example_worker() {
	ctx := context.Background()
	pool := exampleDB()
	client, _ := taskorch.NewClient(pool, nil)

	var runs atomic.Int32 // handlers may run concurrently
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, t *taskorch.TaskFor[SendReport]) error {
		if runs.Add(1) == 1 {
			fmt.Println("attempt 1: the mail server is down")
			return errors.New("mail server down") // failed: retried
		}
		fmt.Printf("attempt %d: report sent to account %d\n", t.Attempt, t.Args.AccountID)
		return nil // done
	}, &taskorch.HandlerOpts{
		Timeout:     time.Minute,
		MaxAttempts: 3,
		RetryDelay:  func(attempt int, err error) time.Duration { return 10 * time.Millisecond },
	})

	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Handlers:     hs,
		Concurrency:  1,
		PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- w.Run(runCtx) }() // until runCtx is cancelled

	res, err := client.Enqueue(ctx, SendReport{AccountID: 7}, nil)
	if err != nil {
		log.Fatal(err)
	}
	task := waitForOutcome(ctx, client, res.TaskID)
	fmt.Println(task.Status, "after", task.Attempt, "attempts")

	stop() // shuts down gracefully: running tasks finish or are given back
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	// Output:
	// attempt 1: the mail server is down
	// attempt 2: report sent to account 7
	// completed after 2 attempts
}

// waitForOutcome polls a task until it is finished (taskorchtest.WaitForOutcome does this in
// tests).
func waitForOutcome(ctx context.Context, client *taskorch.Client, id int64) *taskorch.Task {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		task, err := client.Get(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		if task.Status.Finished() {
			return task
		}
		select {
		case <-ctx.Done():
			log.Fatalf("task %d: no outcome: %v", id, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
