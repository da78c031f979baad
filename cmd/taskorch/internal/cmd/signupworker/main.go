// Command signupworker is a taskorch worker that runs the durable workflow example of
// docs/workflows.md ("Durable workflows in Go", the signup), for the end-to-end test that runs
// the example as the document prints it (TestE2EDurableSignupExample): the code between the
// doc:signup-go markers is the document's block, verbatim. Its mailer records each call in the
// table mail_log, after SIGNUP_MAIL_DELAY (a Go duration; none by default), so that a SIGKILL
// can land while a step runs.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var delay time.Duration
	if d := os.Getenv("SIGNUP_MAIL_DELAY"); d != "" {
		var err error
		if delay, err = time.ParseDuration(d); err != nil {
			return fmt.Errorf("SIGNUP_MAIL_DELAY: %w", err)
		}
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	hs := taskorch.NewHandlers()
	addSignup(hs, loggedMailer{pool: pool, delay: delay})
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 20})
	if err != nil {
		return err
	}
	log.Printf("signupworker: running")
	return w.Run(ctx)
}

// loggedMailer records each call in mail_log (kind, account, key) and answers a message id.
type loggedMailer struct {
	pool  *pgxpool.Pool
	delay time.Duration
}

func (m loggedMailer) Send(ctx context.Context, account int64, key string) (string, error) {
	return m.log(ctx, "welcome", account, key)
}

func (m loggedMailer) SendTips(ctx context.Context, account int64, key string) (string, error) {
	return m.log(ctx, "tips", account, key)
}

func (m loggedMailer) log(ctx context.Context, kind string, account int64, key string) (string, error) {
	select {
	case <-time.After(m.delay):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	var id int64
	err := m.pool.QueryRow(ctx, `insert into mail_log (kind, account, key) values ($1, $2, $3) returning id`, kind, account, key).Scan(&id)
	return fmt.Sprintf("msg-%d", id), err
}

// doc:signup-go begin

// Signup is the args of a user's signup workflow.
type Signup struct{ UserID int64 }

// TaskType is the workflow's task type.
func (Signup) TaskType() string { return "signup" }

// Mailer sends e-mails; a provider that deduplicates by key sends each once.
type Mailer interface {
	Send(ctx context.Context, account int64, key string) (string, error)
	SendTips(ctx context.Context, account int64, key string) (string, error)
}

// addSignup registers the signup workflow: an account, a welcome e-mail, a day later the tips.
func addSignup(hs *taskorch.Handlers, mailer Mailer) {
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, s Signup) error {
		account, err := taskorch.StepTx(wf, "create-account", func(ctx context.Context, tx pgx.Tx) (int64, error) {
			var id int64 // the application's row and the checkpoint commit together: exactly once
			err := tx.QueryRow(ctx, `insert into accounts (user_id) values ($1) returning id`, s.UserID).Scan(&id)
			return id, err
		})
		if err != nil {
			return err
		}
		if _, err := taskorch.Step(wf, "send-welcome", func(ctx context.Context) (string, error) {
			return mailer.Send(ctx, account, taskorch.StepKey(ctx)) // at least once, with a stable key
		}); err != nil {
			return err
		}
		if err := wf.Sleep("a-day-later", 24*time.Hour); err != nil {
			return err // ErrSuspended: the run ends; the task is due again in a day
		}
		_, err = taskorch.Step(wf, "send-tips", func(ctx context.Context) (string, error) {
			return mailer.SendTips(ctx, account, taskorch.StepKey(ctx))
		})
		return err
	})
}

// doc:signup-go end
