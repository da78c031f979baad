package prometheus

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskorch/taskorch/tasktype"
)

// transportMetrics instruments a worker's transport (redis, sqs): taskorch_transport_*, with a
// transport label. A nil *transportMetrics records nothing.
type transportMetrics struct {
	sent, received, acked, refused, redispatched, sendFailed prometheus.Counter
	fallback                                                 prometheus.Gauge
}

func newTransportMetrics(reg prometheus.Registerer, name string) (*transportMetrics, error) {
	labels := prometheus.Labels{"transport": name}
	counter := func(n, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "taskorch", Subsystem: "transport", Name: n, Help: help, ConstLabels: labels})
	}
	m := &transportMetrics{
		sent:         counter("messages_sent_total", "Task ids this worker's dispatcher sent to the transport (redispatches included)."),
		received:     counter("messages_received_total", "Messages this worker received from the transport."),
		acked:        counter("messages_acked_total", "Messages this worker acknowledged (after the task's outcome was committed, or after its claim was refused)."),
		refused:      counter("duplicates_refused_total", "Received messages whose task could not be claimed (claimed by another worker, finished, not due, paused, or of a type this worker does not claim): acknowledged and dropped."),
		redispatched: counter("redispatched_total", "Task ids sent again because they were dispatched but not claimed in time (a lost message), or after an outage."),
		sendFailed:   counter("send_failures_total", "Task ids the dispatcher could not send; their tasks stayed eligible."),
		fallback: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "taskorch", Subsystem: "transport", Name: "fallback",
			Help: "1 while the transport is unreachable and the worker claims from PostgreSQL by polling, else 0.", ConstLabels: labels}),
	}
	for _, c := range []prometheus.Collector{m.sent, m.received, m.acked, m.refused, m.redispatched, m.sendFailed, m.fallback} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering transport metrics: %v (give each worker its own registry)", err)
		}
	}
	return m, nil
}

// event counts a transport's event.
func (m *transportMetrics) event(e tasktype.WorkerEvent) {
	if m == nil {
		return
	}
	n := float64(e.N)
	switch e.Kind {
	case tasktype.EventMessagesSent:
		m.sent.Add(n)
	case tasktype.EventMessagesReceived:
		m.received.Add(n)
	case tasktype.EventMessagesAcked:
		m.acked.Add(n)
	case tasktype.EventMessagesRefused:
		m.refused.Add(n)
	case tasktype.EventMessagesRedispatched:
		m.redispatched.Add(n)
	case tasktype.EventSendFailed:
		m.sendFailed.Add(n)
	case tasktype.EventFallback:
		if e.On {
			m.fallback.Set(1)
		} else {
			m.fallback.Set(0)
		}
	}
}
