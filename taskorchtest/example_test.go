package taskorchtest_test

import (
	"context"
	"fmt"
	"testing"

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

// In a test: run a worker with the handler under test, enqueue, and wait for the outcome.
func Example() {
	ctx := context.Background()
	t := exampleT()         // in a test, its *testing.T
	pool := dbtest.NewDB(t) // in a test, a pool on a migrated database of its own
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
	pool := dbtest.NewDB(t)
	client, _ := taskorch.NewClient(pool, nil)

	tx, _ := pool.Begin(ctx)
	defer func() { _ = tx.Rollback(ctx) }()
	// The code under test.
	_, _ = client.EnqueueTx(ctx, tx, SendReport{AccountID: 7}, &taskorch.EnqueueOpts{MaxAttempts: 3})

	task := taskorchtest.RequireEnqueued[SendReport](ctx, t, tx, &taskorchtest.RequireEnqueuedOpts{MaxAttempts: 3})
	fmt.Println(task.Type, task.Args.AccountID, task.Status)
	// Output: send_report 7 pending
}
