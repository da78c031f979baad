package taskorch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/taskorch/taskorch"
)

// InvoiceArgs is an example task of a multi-tenant service: the tenant is in the payload.
type InvoiceArgs struct {
	Tenant string `json:"tenant"`
	Amount int    `json:"amount"`
}

func (InvoiceArgs) TaskType() string { return "send_invoice" }

type tenantKey struct{}

// withTenant is tenant middleware: it reads the payload's "tenant" and puts it in the context
// the handler gets, so that the handler's database calls, logs and metrics carry it. A payload
// without one fails the task for good: retrying cannot fix it.
func withTenant(next taskorch.Handler) taskorch.Handler {
	return taskorch.HandlerFunc(func(ctx context.Context, t *taskorch.Task) error {
		var p struct {
			Tenant string `json:"tenant"`
		}
		if err := json.Unmarshal(t.Payload, &p); err != nil || p.Tenant == "" {
			return taskorch.Discard(errors.New("the payload names no tenant"))
		}
		return next.Work(context.WithValue(ctx, tenantKey{}, p.Tenant), t)
	})
}

// logTasks is logging middleware: a line when each task's attempt ends, with its id, type,
// attempt, tenant (when a middleware outside it put one in the context) and error. (The worker logs its own lines; this one is the application's.)
func logTasks(logger *slog.Logger) taskorch.Middleware {
	return func(next taskorch.Handler) taskorch.Handler {
		return taskorch.HandlerFunc(func(ctx context.Context, t *taskorch.Task) error {
			err := next.Work(ctx, t)
			logger.InfoContext(ctx, "task attempt ended", "task_id", t.ID, "task_type", t.Type,
				"attempt", t.Attempt, "tenant", ctx.Value(tenantKey{}), "error", err)
			return err
		})
	}
}

// Span is a stand-in for a tracer's span (with OpenTelemetry: tracer.Start, span.RecordError,
// span.End). The worker's own spans come from the contrib/otel observer; middleware adds the
// application's, as children of the context it is given.
type Span struct{ name string }

// traceTasks is tracing middleware: a span around each attempt, its error recorded.
func traceTasks(start func(ctx context.Context, name string) (context.Context, *Span), end func(*Span, error)) taskorch.Middleware {
	return func(next taskorch.Handler) taskorch.Handler {
		return taskorch.HandlerFunc(func(ctx context.Context, t *taskorch.Task) error {
			ctx, span := start(ctx, "work "+t.Type)
			err := next.Work(ctx, t)
			end(span, err)
			return err
		})
	}
}

// Middleware wraps every Go handler of a worker, the first outermost: here tracing, then
// the tenant, then logging, inside the tenant's so that its lines carry it; the handler reads
// the tenant from its context.
func Example_middleware() {
	ctx := context.Background()
	pool := exampleDB()
	client, _ := taskorch.NewClient(pool, nil)

	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, t *taskorch.TaskFor[InvoiceArgs]) error {
		fmt.Printf("invoice of %d for tenant %s\n", t.Args.Amount, ctx.Value(tenantKey{}))
		return nil
	})
	// The example's log, without times, so that its output is the same at every run.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "task_id" {
				return slog.Attr{}
			}
			return a
		},
	}))
	start := func(ctx context.Context, name string) (context.Context, *Span) {
		fmt.Println("span started:", name)
		return ctx, &Span{name: name}
	}
	end := func(s *Span, err error) { fmt.Println("span ended:", s.name, "error:", err) }

	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Handlers:     hs,
		Middleware:   []taskorch.Middleware{traceTasks(start, end), withTenant, logTasks(logger)},
		PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = w.Run(ctx) }()

	res, err := client.Enqueue(ctx, InvoiceArgs{Tenant: "acme", Amount: 120}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(waitForOutcome(ctx, client, res.TaskID).Status)
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// span started: work send_invoice
	// invoice of 120 for tenant acme
	// level=INFO msg="task attempt ended" task_type=send_invoice attempt=1 tenant=acme error=<nil>
	// span ended: work send_invoice error: <nil>
	// completed
}
