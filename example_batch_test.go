package taskorch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/taskorch/taskorch"
)

// PushNotification is the args of the batch handler example's tasks.
type PushNotification struct {
	Device string `json:"device"`
}

func (PushNotification) TaskType() string { return "push_notification" }

// A batch handler takes several claimed tasks of its type in one call, here to send pushes in
// one request, and returns one error per task: each task keeps its own outcome. The three
// tasks are enqueued before the worker starts, so one claim brings them and they are one batch;
// the push to a device the service refuses fails (and is retried later), the others complete.
func ExampleAddBatchHandler() {
	ctx := context.Background()
	pool := exampleDB()
	client, _ := taskorch.NewClient(pool, nil)

	var ids []int64
	for _, device := range []string{"phone", "tablet", "toaster"} {
		res, err := client.Enqueue(ctx, PushNotification{Device: device}, &taskorch.EnqueueOpts{MaxAttempts: 1})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, res.TaskID)
	}

	hs := taskorch.NewHandlers()
	taskorch.AddBatchHandler(hs, func(ctx context.Context, tasks []*taskorch.TaskFor[PushNotification]) []error {
		fmt.Printf("one call for %d pushes\n", len(tasks))
		errs := make([]error, len(tasks))
		for i, t := range tasks {
			if t.Args.Device == "toaster" {
				errs[i] = errors.New("device does not take pushes")
			}
		}
		return errs
	}, &taskorch.BatchOpts{MaxSize: 50, HandlerOpts: taskorch.HandlerOpts{Timeout: time.Minute}})

	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Handlers:     hs,
		PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- w.Run(runCtx) }()

	for _, id := range ids {
		task := waitForOutcome(ctx, client, id)
		var args PushNotification
		if err := json.Unmarshal(task.Payload, &args); err != nil {
			log.Fatal(err)
		}
		fmt.Println(args.Device, task.Status)
	}
	stop()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	// Output:
	// one call for 3 pushes
	// phone completed
	// tablet completed
	// toaster dead
}
