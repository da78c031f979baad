// Package otel traces a taskorch worker's tasks with OpenTelemetry: an Observer
// (WorkerConfig.Observers) that gives every task run a consumer span "taskorch.task <type>",
// carrying the task's id, type, attempt, lease and worker, marked as an error when the attempt
// fails, and linked to the enqueuing trace when the payload carries a W3C "traceparent" (which
// TraceContext, given as ClientConfig.TraceContext, adds at enqueue). `taskorch worker` sets it
// up from TASKORCH_TRACING.
//
//	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
//		Handlers:  hs,
//		Observers: []taskorch.Observer{taskorchotel.New(tracerProvider)},
//	})
//	client, err := taskorch.NewClient(pool, &taskorch.ClientConfig{TraceContext: taskorchotel.TraceContext})
//
// River's rivercontrib/otelriver is the model. It is a module of its own, so that a program
// that does not trace does not carry OpenTelemetry.
package otel

import (
	"context"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskorch/taskorch/tasktype"
)

// TracerName is the instrumentation scope of taskorch's spans.
const TracerName = "github.com/taskorch/taskorch"

// Observer traces a worker's task runs. Make it with New.
type Observer struct {
	tasktype.ObserverDefaults
	tracer   trace.Tracer
	workerID string
}

// New returns an observer that traces with tp. A nil tp traces nothing.
func New(tp trace.TracerProvider) *Observer {
	o := &Observer{}
	if tp != nil {
		o.tracer = tp.Tracer(TracerName)
	}
	return o
}

// Attach notes the worker's id, an attribute of every span.
func (o *Observer) Attach(w tasktype.WorkerInfo) error {
	o.workerID = w.ID
	return nil
}

// traceFields are the W3C Trace Context fields a payload may carry: the enqueuer's trace.
type traceFields struct {
	TraceParent string `json:"traceparent"`
	TraceState  string `json:"tracestate"`
}

var traceContext = propagation.TraceContext{}

// TaskStarted starts the span of one task run (a consumer span named "taskorch.task <type>"),
// linked to the enqueuing trace when the payload carries a traceparent.
func (o *Observer) TaskStarted(ctx context.Context, t *tasktype.Task) context.Context {
	if o.tracer == nil {
		return ctx
	}
	var lease int64
	if t.LeaseID != nil {
		lease = *t.LeaseID
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "taskorch"),
			attribute.String("messaging.operation.type", "process"),
			attribute.Int64("taskorch.task.id", t.ID),
			attribute.String("taskorch.task.type", t.Type),
			attribute.Int("taskorch.task.attempt", t.Attempt),
			attribute.Int64("taskorch.lease.id", lease),
			attribute.String("taskorch.worker.id", o.workerID),
		),
	}
	var tf traceFields
	if json.Unmarshal(t.Payload, &tf) == nil && tf.TraceParent != "" {
		carrier := propagation.MapCarrier{"traceparent": tf.TraceParent}
		if tf.TraceState != "" {
			carrier["tracestate"] = tf.TraceState
		}
		if sc := trace.SpanContextFromContext(traceContext.Extract(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), carrier)); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
				attribute.String("taskorch.link", "enqueued_by"),
			}}))
		}
	}
	ctx, _ = o.tracer.Start(ctx, "taskorch.task "+t.Type, opts...)
	return ctx
}

// TaskFinished marks the span failed when the attempt failed, and ends it: after the outcome is
// committed.
func (o *Observer) TaskFinished(ctx context.Context, _ *tasktype.Task, f tasktype.TaskFinish) {
	if o.tracer == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if f.Error != "" && span.IsRecording() {
		span.SetAttributes(attribute.Bool("taskorch.task.retriable", f.Retriable))
		span.SetStatus(codes.Error, bound(f.Error, 512))
	}
	span.End()
}

// TraceContext returns the W3C trace context of ctx's span ("" when it has none): given as
// ClientConfig.TraceContext, it makes enqueued payloads carry the enqueuer's trace.
func TraceContext(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier["traceparent"], carrier["tracestate"]
}

// bound cuts s to at most n bytes of valid UTF-8, on a rune boundary, with a mark.
func bound(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const mark = "…(truncated)"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
