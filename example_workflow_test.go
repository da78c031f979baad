package taskorch_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/taskorch/taskorch"
)

// Workflow returns the tasks enqueued after one another, with their parents: here an order
// charged, then reserved and receipted in parallel, then shipped with the results of both. The
// ship handler reads its parents' results with ParentResults.
func ExampleClient_Workflow() {
	ctx := context.Background()
	pool := exampleDB()
	client, _ := taskorch.NewClient(pool, nil)

	shipped := make(chan string, 1)
	hs := taskorch.NewHandlers()
	for _, typ := range []string{"order.charge", "order.reserve", "order.receipt"} {
		hs.HandleFunc(typ, func(ctx context.Context, t *taskorch.Task) error {
			return taskorch.SetResult(ctx, t.Type+" done")
		})
	}
	hs.HandleFunc("order.ship", func(ctx context.Context, t *taskorch.Task) error {
		parents, err := client.ParentResults(ctx, t.ID)
		if err != nil {
			return err
		}
		shipped <- fmt.Sprintf("shipping after %s and %s", parents[0].Result, parents[1].Result)
		return nil
	})

	enq := func(typ string, after ...int64) int64 {
		res, err := client.Enqueue(ctx, taskorch.RawArgs{Type: typ, Payload: []byte(`{"order": 7}`)},
			&taskorch.EnqueueOpts{After: after})
		if err != nil {
			log.Fatal(err)
		}
		return res.TaskID
	}
	charge := enq("order.charge")
	reserve := enq("order.reserve", charge)
	receipt := enq("order.receipt", charge)
	ship := enq("order.ship", reserve, receipt)

	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Handlers: hs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = w.Run(runCtx) }()
	fmt.Println(<-shipped)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := client.Wait(waitCtx, ship); err != nil {
		log.Fatal(err)
	}

	wf, err := client.Workflow(ctx, charge)
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range wf.Nodes {
		fmt.Println(n.Type, n.Status, "parents:", len(n.Parents))
	}
	// Output:
	// shipping after "order.reserve done" and "order.receipt done"
	// order.charge completed parents: 0
	// order.reserve completed parents: 1
	// order.receipt completed parents: 1
	// order.ship completed parents: 2
}
