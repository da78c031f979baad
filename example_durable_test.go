package taskorch_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
)

type Signup struct {
	Email string `json:"email"`
}

func (Signup) TaskType() string { return "signup" }

// AddWorkflow registers a durable workflow: the account row and its checkpoint commit together
// (StepTx, exactly once), the welcome e-mail runs at least once with a stable key (Step), and the
// workflow waits for the address to be confirmed (AwaitSignal) without holding a worker slot. The
// first attempt fails after the account step; the second replays it instead of inserting again.
func ExampleAddWorkflow() {
	ctx := context.Background()
	pool := exampleDB()
	client, _ := taskorch.NewClient(pool, nil)
	if _, err := pool.Exec(ctx, `create table accounts (id bigserial primary key, email text);
		grant insert on accounts to worker_service_user; grant usage on sequence accounts_id_seq to worker_service_user`); err != nil {
		log.Fatal(err)
	}

	waiting := make(chan struct{}, 1)
	var failedOnce atomic.Bool
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, s Signup) error {
		account, err := taskorch.StepTx(wf, "create-account", func(ctx context.Context, tx pgx.Tx) (int64, error) {
			var id int64
			err := tx.QueryRow(ctx, `insert into accounts (email) values ($1) returning id`, s.Email).Scan(&id)
			return id, err
		})
		if err != nil {
			return err
		}
		if failedOnce.CompareAndSwap(false, true) {
			return errors.New("the mail provider is down") // the next attempt replays create-account
		}
		if _, err := taskorch.Step(wf, "send-welcome", func(ctx context.Context) (string, error) {
			// A provider call that deduplicates by key: StepKey is the same if the step runs again.
			return "sent with key " + taskorch.StepKey(ctx), nil
		}); err != nil {
			return err
		}
		c, received, err := taskorch.AwaitSignal[map[string]string](wf, "email.confirmed", s.Email, 24*time.Hour)
		if errors.Is(err, taskorch.ErrSuspended) {
			waiting <- struct{}{}
		}
		if err != nil {
			return err
		}
		return taskorch.SetResult(ctx, fmt.Sprintf("account %d confirmed: %v at %s", account, received, c["at"]))
	}, &taskorch.HandlerOpts{RetryDelay: func(int, error) time.Duration { return 0 }})

	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Handlers: hs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = w.Run(runCtx) }()

	res, err := client.Enqueue(ctx, Signup{Email: "ann@example.com"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	<-waiting // suspended: no slot held while it waits
	if _, err := client.Signal(ctx, "email.confirmed", "ann@example.com", map[string]string{"at": "09:30"}); err != nil {
		log.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done, err := client.Wait(waitCtx, res.TaskID)
	if err != nil {
		log.Fatal(err)
	}
	var accounts int
	_ = pool.QueryRow(ctx, `select count(*) from accounts`).Scan(&accounts)
	fmt.Println(string(done.Result))
	fmt.Println("accounts:", accounts)
	// Output:
	// "account 1 confirmed: true at 09:30"
	// accounts: 1
}
