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

type Resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

func (Resize) TaskType() string { return "resize" }

type Thumb struct {
	URL string `json:"url"`
}

// Wait returns a task once it has finished, with the result its handler returned, woken by the
// completion's notification rather than by polling.
func ExampleClient_Wait() {
	ctx := context.Background()
	pool := exampleDB()
	client, _ := taskorch.NewClient(pool, nil)

	hs := taskorch.NewHandlers()
	taskorch.AddHandlerWithResult(hs, func(ctx context.Context, t *taskorch.TaskFor[Resize]) (Thumb, error) {
		return Thumb{URL: fmt.Sprintf("s3://thumbs/%d/%s", t.Args.Width, t.Args.Image)}, nil
	})
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Handlers: hs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = w.Run(runCtx) }()

	res, err := client.Enqueue(ctx, Resize{Image: "cat.png", Width: 128}, nil)
	if err != nil {
		log.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	task, err := client.Wait(waitCtx, res.TaskID)
	if err != nil {
		log.Fatal(err)
	}
	var thumb Thumb
	if err := json.Unmarshal(task.Result, &thumb); err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Status, thumb.URL)

	_, err = client.Wait(waitCtx, 424242)
	fmt.Println(errors.Is(err, taskorch.ErrNotFound))
	// Output:
	// completed s3://thumbs/128/cat.png
	// true
}
