package taskorch_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// exampleDB returns a pool on a fresh migrated database for an example. In an application this
// is pgxpool.New(ctx, os.Getenv("DATABASE_URL")) followed by taskorch.Migrate.
func exampleDB() *pgxpool.Pool {
	return dbtest.NewDB(&dbtest.ExampleTB{})
}

type SendReport struct {
	AccountID int64 `json:"account_id"`
}

func (SendReport) TaskType() string { return "send_report" }

func Example() {
	ctx := context.Background()
	pool := exampleDB()

	client, err := taskorch.NewClient(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := client.Enqueue(ctx, SendReport{AccountID: 7}, &taskorch.EnqueueOpts{Priority: new(5)})
	if err != nil {
		log.Fatal(err)
	}
	task, err := client.Get(ctx, res.TaskID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Type, task.Status, task.Priority, string(task.Payload))
	// Output: send_report pending 5 {"account_id": 7}
}

// An idempotency key makes enqueueing safe to repeat: the second call returns the first task.
func ExampleClient_Enqueue_idempotencyKey() {
	ctx := context.Background()
	client, _ := taskorch.NewClient(exampleDB(), nil)

	first, _ := client.Enqueue(ctx, SendReport{AccountID: 7}, &taskorch.EnqueueOpts{IdempotencyKey: "report-7"})
	again, _ := client.Enqueue(ctx, SendReport{AccountID: 7}, &taskorch.EnqueueOpts{IdempotencyKey: "report-7"})
	fmt.Println(first.TaskID == again.TaskID, first.Duplicate, again.Duplicate)
	// Output: true false true
}

// A task enqueued with EnqueueTx commits or rolls back with the application's own writes.
func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	pool := exampleDB()
	client, _ := taskorch.NewClient(pool, nil)

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	res, err := client.EnqueueTx(ctx, tx, SendReport{AccountID: 8}, nil)
	if err != nil {
		log.Fatal(err)
	}
	_ = tx.Rollback(ctx) // the application changed its mind

	_, err = client.Get(ctx, res.TaskID)
	fmt.Println(errors.Is(err, taskorch.ErrNotFound))
	// Output: true
}

// EnqueueMany inserts many tasks in one statement and returns a result per task, in order:
// its id, and whether an idempotency key found an existing task instead.
func ExampleClient_EnqueueMany() {
	ctx := context.Background()
	client, _ := taskorch.NewClient(exampleDB(), nil)

	_, _ = client.Enqueue(ctx, SendReport{AccountID: 1}, &taskorch.EnqueueOpts{IdempotencyKey: "report-1"})
	var batch []taskorch.EnqueueParams
	for i := range 3 {
		key := fmt.Sprintf("report-%d", i)
		batch = append(batch, taskorch.EnqueueParams{Args: SendReport{AccountID: int64(i)},
			Opts: &taskorch.EnqueueOpts{IdempotencyKey: key}})
	}
	results, err := client.EnqueueMany(ctx, batch)
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		fmt.Printf("report-%d duplicate=%v\n", i, r.Duplicate)
	}
	fmt.Println(results[0].TaskID < results[2].TaskID)
	// Output:
	// report-0 duplicate=false
	// report-1 duplicate=true
	// report-2 duplicate=false
	// true
}

// Bad input is refused before anything is written, with an error that says why.
func ExampleInputError() {
	ctx := context.Background()
	client, _ := taskorch.NewClient(exampleDB(), nil)

	_, err := client.Enqueue(ctx, taskorch.RawArgs{Type: "report", Payload: []byte(`[1, 2]`)}, nil)
	fmt.Println(errors.Is(err, taskorch.ErrInvalidInput))
	fmt.Println(err)
	// Output:
	// true
	// taskorch: payload of report must be a JSON object, got [1,2]
}

// Retry brings a dead task back; Cancel stops a pending one.
func ExampleClient_Cancel() {
	ctx := context.Background()
	client, _ := taskorch.NewClient(exampleDB(), nil)

	res, _ := client.Enqueue(ctx, taskorch.RawArgs{Type: "cleanup"}, nil)
	task, err := client.Cancel(ctx, res.TaskID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Status)
	task, _ = client.Retry(ctx, res.TaskID)
	fmt.Println(task.Status)
	// Output:
	// cancelled
	// pending
}

var _ = os.Getenv
