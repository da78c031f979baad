package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskorch/taskorch"
	taskorchotel "github.com/taskorch/taskorch/contrib/otel"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

type traced struct{ N int }

func (traced) TaskType() string { return "traced" }

// A span per task run, linked to the trace that enqueued it; failures mark the span as errors.
func TestTracingSpanPerTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	client, err := taskorch.NewClient(pool, &taskorch.ClientConfig{TraceContext: taskorchotel.TraceContext})
	require.NoError(t, err)

	// Enqueue inside an application span: the payload carries its traceparent.
	appCtx, appSpan := tp.Tracer("app").Start(ctx, "POST /signup")
	ok, err := client.Enqueue(appCtx, traced{N: 1}, nil)
	require.NoError(t, err)
	appSpan.End()
	bad, err := client.Enqueue(ctx, traced{N: 2}, &taskorch.EnqueueOpts{MaxAttempts: 1})
	require.NoError(t, err)
	require.Contains(t, scalar[string](t, pool, `select payload->>'traceparent' from queues.task where task_id = $1`, ok.TaskID),
		appSpan.SpanContext().TraceID().String())
	require.Empty(t, scalar[*string](t, pool, `select payload->>'traceparent' from queues.task where task_id = $1`, bad.TaskID),
		"no span, no traceparent")

	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(_ context.Context, task *taskorch.TaskFor[traced]) error {
		if task.Args.N == 2 {
			return errors.New("card declined")
		}
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{ID: "tracer-1", Handlers: hs, Observers: []taskorch.Observer{taskorchotel.New(tp)}})
	waitStatus(t, pool, ok.TaskID, taskorch.StatusCompleted)
	waitStatus(t, pool, bad.TaskID, taskorch.StatusDead)
	require.Eventually(t, func() bool { return len(rec.Ended()) >= 3 }, 5*time.Second, 5*time.Millisecond)

	byTask := map[int64]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == "taskorch.task.id" {
				byTask[a.Value.AsInt64()] = s
			}
		}
	}
	s := byTask[ok.TaskID]
	require.NotNil(t, s)
	require.Equal(t, "taskorch.task traced", s.Name())
	require.Equal(t, codes.Unset, s.Status().Code)
	require.Contains(t, s.Attributes(), attribute.String("taskorch.worker.id", "tracer-1"))
	require.Len(t, s.Links(), 1)
	require.Equal(t, appSpan.SpanContext().TraceID(), s.Links()[0].SpanContext.TraceID())
	require.Equal(t, appSpan.SpanContext().SpanID(), s.Links()[0].SpanContext.SpanID())

	s = byTask[bad.TaskID]
	require.NotNil(t, s)
	require.Equal(t, codes.Error, s.Status().Code)
	require.Contains(t, s.Status().Description, "card declined")
	require.Empty(t, s.Links())
}
