package chaos

import (
	"context"
	"fmt"
)

// Toxiproxy is a toxiproxy-server for this module's other tests (a replication link made slow,
// for one): the harness's own, with a small API.
type Toxiproxy struct{ tp *toxiproxy }

// StartToxiproxy starts toxiproxy-server with its API on 127.0.0.1, logging to logPath. Stop
// it with Stop.
func StartToxiproxy(ctx context.Context, logPath string) (*Toxiproxy, error) {
	tp, err := startToxiproxy(ctx, logPath)
	if err != nil {
		return nil, err
	}
	return &Toxiproxy{tp: tp}, nil
}

// Proxy makes a proxy named name from listen (host:port) to upstream (host:port).
func (t *Toxiproxy) Proxy(ctx context.Context, name, listen, upstream string) error {
	return t.tp.createProxy(ctx, name, listen, upstream)
}

// Latency delays every byte the proxy's upstream sends back (its "downstream" stream) by ms.
func (t *Toxiproxy) Latency(ctx context.Context, proxy string, ms int) error {
	if ms <= 0 {
		return fmt.Errorf("chaos: latency must be positive, got %d ms", ms)
	}
	return t.tp.addToxic(ctx, proxy, "latency_downstream", "latency", "downstream", map[string]any{"latency": ms})
}

// Stop kills the server.
func (t *Toxiproxy) Stop() { t.tp.stop() }
