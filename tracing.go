package taskorch

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of taskorch's spans.
const tracerName = "github.com/taskorch/taskorch"

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// traceFields are the W3C Trace Context fields a payload may carry: the enqueuer's trace.
type traceFields struct {
	TraceParent string `json:"traceparent"`
	TraceState  string `json:"tracestate"`
}

var traceContext = propagation.TraceContext{}

// startTaskSpan starts the span of one task run (a consumer span named "taskorch.task
// <type>"), linked to the enqueuing trace when the payload carries a traceparent. It returns ctx
// unchanged and a no-op end when tracing is off.
func (w *Worker) startTaskSpan(ctx context.Context, t *Task) (context.Context, func()) {
	if w.tracer == nil {
		return ctx, func() {}
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "taskorch"),
			attribute.String("messaging.operation.type", "process"),
			attribute.Int64("taskorch.task.id", t.ID),
			attribute.String("taskorch.task.type", t.Type),
			attribute.Int("taskorch.task.attempt", t.Attempt),
			attribute.Int64("taskorch.lease.id", *t.LeaseID),
			attribute.String("taskorch.worker.id", w.cfg.ID),
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
	ctx, span := w.tracer.Start(ctx, "taskorch.task "+t.Type, opts...)
	return ctx, func() { span.End() }
}

// spanFailed marks the task's span (if any) as failed with msg.
func spanFailed(ctx context.Context, msg string, retriable bool) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Bool("taskorch.task.retriable", retriable))
	span.SetStatus(codes.Error, truncate(msg, 512))
}

// injectTraceParent adds the W3C traceparent (and tracestate) of ctx's span to a JSON object
// payload that does not carry one yet, so the worker's span links back to the enqueuer.
func injectTraceParent(ctx context.Context, payload string) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return payload
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(payload), &m); err != nil || m == nil {
		return payload
	}
	if _, ok := m["traceparent"]; ok {
		return payload
	}
	for k, v := range carrier {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	out, err := json.Marshal(m)
	if err != nil {
		return payload
	}
	return string(out)
}
