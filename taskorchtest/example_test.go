package taskorchtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/taskorchtest"
)

type SendReport struct {
	AccountID int64 `json:"account_id"`
}

func (SendReport) TaskType() string { return "send_report" }

// exampleT stands for the *testing.T a test gets; an example has none.
func exampleT() testing.TB { return &dbtest.ExampleTB{} }

// serverURL stands for the URL of the PostgreSQL server a program's tests use, e.g.
// os.Getenv("TASKORCH_TEST_DATABASE_URL"): a user that may create databases.
func serverURL() string { return dbtest.AdminURL(exampleT()) }

// In a test: run a worker with the handler under test, enqueue, and wait for the outcome.
func Example() {
	ctx := context.Background()
	t := exampleT()                                 // in a test, its *testing.T
	pool := taskorchtest.NewDB(t, serverURL(), nil) // a migrated database of the test's own
	client, _ := taskorch.NewClient(pool, nil)

	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, task *taskorch.TaskFor[SendReport]) error {
		fmt.Println("report sent to account", task.Args.AccountID)
		return nil
	})
	taskorchtest.StartWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs}) // stopped when the test ends

	res, _ := client.Enqueue(ctx, SendReport{AccountID: 7}, nil)
	task := taskorchtest.WaitForOutcome(ctx, t, client, res.TaskID)
	fmt.Println(task.Status, "at attempt", task.Attempt)
	// Output:
	// report sent to account 7
	// completed at attempt 1
}

// Code that enqueues in the caller's transaction is tested in the test's transaction, with
// nothing committed.
func ExampleRequireEnqueued() {
	ctx := context.Background()
	t := exampleT()
	pool := taskorchtest.NewDB(t, serverURL(), nil)
	client, _ := taskorch.NewClient(pool, nil)

	tx := taskorchtest.Tx(t, pool) // rolled back when the test ends
	// The code under test.
	_, _ = client.EnqueueTx(ctx, tx, SendReport{AccountID: 7}, &taskorch.EnqueueOpts{MaxAttempts: 3})

	task := taskorchtest.RequireEnqueued[SendReport](ctx, t, tx, &taskorchtest.RequireEnqueuedOpts{MaxAttempts: 3})
	fmt.Println(task.Type, task.Args.AccountID, task.Status)
	// Output: send_report 7 pending
}

type Resize struct {
	Width int `json:"width"`
}

func (Resize) TaskType() string { return "resize" }

// A handler run once, synchronously, without a worker: what it set, snoozed, discarded or
// returned is in the result.
func ExampleWork() {
	ctx := context.Background()
	t := exampleT()
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, task *taskorch.TaskFor[Resize]) error {
		if task.Args.Width <= 0 {
			return taskorch.Discard(fmt.Errorf("width %d: must be positive", task.Args.Width))
		}
		return taskorch.SetResult(ctx, map[string]int{"width": task.Args.Width})
	})
	cfg := &taskorch.WorkerConfig{Handlers: hs}

	res := taskorchtest.Work(ctx, t, cfg, Resize{Width: 128}, nil)
	fmt.Println(res.Outcome, string(res.Result))
	res = taskorchtest.Work(ctx, t, cfg, Resize{Width: -1}, nil)
	fmt.Println(res.Outcome, res.Retriable, res.Message)
	// Output:
	// completed {"width":128}
	// failed false width -1: must be positive
}

// A handler that enqueues in the test's transaction, run through its handler there: the
// outcome is written in the transaction, as a worker writes it.
func ExampleWorkTask() {
	ctx := context.Background()
	t := exampleT()
	pool := taskorchtest.NewDB(t, serverURL(), nil)
	client, _ := taskorch.NewClient(pool, nil)
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[Resize]) error {
		return taskorch.Snooze(time.Minute)
	})

	tx := taskorchtest.Tx(t, pool)
	res, _ := client.EnqueueTx(ctx, tx, Resize{Width: 64}, nil) // the code under test
	ran := taskorchtest.WorkTask(ctx, t, &taskorch.WorkerConfig{Handlers: hs}, tx, res.TaskID)
	fmt.Println(ran.Outcome, ran.Snooze, ran.Task.Status)
	// Output: snoozed 1m0s pending
}

// A handler function called by the test itself: HandlerContext lets its SetResult work.
func ExampleHandlerContext() {
	ctx, result := taskorchtest.HandlerContext(context.Background(), 0)
	handler := func(ctx context.Context, _ *taskorch.TaskFor[Resize]) error {
		return taskorch.SetResult(ctx, "done")
	}
	_ = handler(ctx, &taskorch.TaskFor[Resize]{Task: &taskorch.Task{Attempt: 1}, Args: Resize{Width: 1}})
	fmt.Println(string(result.Value()))
	// Output: "done"
}
