package main

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf over POST /v1/traces), as a collector
// would run it: it keeps the span names and attributes it was sent.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string]map[string]string // span name -> attribute key -> string value
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var msg coltrace.ExportTraceServiceRequest
	if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &msg) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, a := range s.GetAttributes() {
					attrs[a.GetKey()] = a.GetValue().String()
				}
				for _, a := range rs.GetResource().GetAttributes() {
					attrs["resource."+a.GetKey()] = a.GetValue().String()
				}
				r.spans[s.GetName()] = attrs
			}
		}
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (r *otlpReceiver) span(name string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spans[name]
}

// TASKORCH_TRACING=otlp: the worker process exports a span per task run over OTLP/HTTP.
func TestE2ETracingOTLP(t *testing.T) {
	t.Parallel()
	recv := &otlpReceiver{spans: map[string]map[string]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	startWorkerProc(t, url, "TASKORCH_TRACING=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+ln.Addr().String(),
		"OTEL_BSP_SCHEDULE_DELAY=50", "TASKORCH_WORKER_ID=traced-worker")
	id := enqueue(t, pool, "taskorch.noop", `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, 0)
	waitStatus(t, pool, id, "completed")
	require.Eventually(t, func() bool { return recv.span("taskorch.task taskorch.noop") != nil }, 10*time.Second, 20*time.Millisecond)
	attrs := recv.span("taskorch.task taskorch.noop")
	require.Contains(t, attrs["taskorch.task.id"], "int_value:"+strconv.FormatInt(id, 10))
	require.Contains(t, attrs["taskorch.worker.id"], "traced-worker")
	require.Contains(t, attrs["resource.service.name"], "taskorch-worker")

	r := run(t, "worker", "--database-url", url, "--tracing", "zipkin")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, `TASKORCH_TRACING="zipkin": want off or otlp`)
}
