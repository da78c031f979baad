package main

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// newTracerProvider builds the worker's OpenTelemetry tracer provider for TASKORCH_TRACING:
// "off" (the default) gives nil, tracing nothing; "otlp" exports spans over OTLP/HTTP, configured
// by the standard OTEL_EXPORTER_OTLP_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, ..._HEADERS, ...)
// and batched per OTEL_BSP_*. The returned shutdown flushes what is buffered.
func newTracerProvider(ctx context.Context, mode, workerID, ver string) (trace.TracerProvider, func(context.Context) error, error) {
	switch mode {
	case "", "off", "none":
		return nil, func(context.Context) error { return nil }, nil
	case "otlp":
	default:
		return nil, nil, usageErrorf("TASKORCH_TRACING=%q: want off or otlp", mode)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName("taskorch-worker"), semconv.ServiceVersion(ver)}
	if workerID != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(workerID))
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, attrs...))
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}
