package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// toxiproxyVersion is the toxiproxy-server scripts/install-deps.sh installs.
const toxiproxyVersion = "v2.5.0"

// findToxiproxy finds toxiproxy-server on PATH or in $(go env GOPATH)/bin.
func findToxiproxy() (string, error) {
	if p, err := exec.LookPath("toxiproxy-server"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = string(bytes.TrimSpace(out))
		}
	}
	if gopath != "" {
		p := filepath.Join(gopath, "bin", "toxiproxy-server")
		if _, err := os.Stat(p); err == nil { //nolint:gosec // GOPATH is the operator's own setting
			return p, nil
		}
	}
	return "", fmt.Errorf("toxiproxy-server is not installed: run scripts/install-deps.sh "+
		"(it installs github.com/Shopify/toxiproxy/v2/cmd/server@%s as toxiproxy-server)", toxiproxyVersion)
}

// toxiproxy is a toxiproxy-server run by the harness, listening on 127.0.0.1, driven over its
// HTTP API.
type toxiproxy struct {
	proc *process
	api  string // http://127.0.0.1:PORT
	hc   *http.Client
}

// startToxiproxy starts toxiproxy-server with its API on 127.0.0.1, logging to logPath.
func startToxiproxy(ctx context.Context, logPath string) (*toxiproxy, error) {
	bin, err := findToxiproxy()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	proc, err := startProcess(processSpec{
		name: "toxiproxy", argv: []string{bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port)}, logPath: logPath,
		env: []string{"LOG_LEVEL=info"},
	})
	if err != nil {
		return nil, err
	}
	tp := &toxiproxy{proc: proc, api: "http://127.0.0.1:" + strconv.Itoa(port), hc: &http.Client{Timeout: 10 * time.Second}}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := tp.call(ctx, http.MethodGet, "/version", nil, nil); err == nil {
			return tp, nil
		} else if time.Now().After(deadline) {
			proc.kill()
			return nil, fmt.Errorf("toxiproxy-server did not answer on %s: %w (log: %s)", tp.api, err, logPath)
		}
		select {
		case <-ctx.Done():
			proc.kill()
			return nil, ctx.Err()
		case <-proc.done:
			return nil, fmt.Errorf("toxiproxy-server exited at start (log: %s)", logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// call sends one API request with body (JSON, may be nil) and decodes the answer into out
// (may be nil).
func (tp *toxiproxy) call(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, tp.api+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := tp.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("toxiproxy %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// createProxy makes a proxy named name from listen to upstream.
func (tp *toxiproxy) createProxy(ctx context.Context, name, listen, upstream string) error {
	return tp.call(ctx, http.MethodPost, "/proxies",
		map[string]any{"name": name, "listen": listen, "upstream": upstream, "enabled": true}, nil)
}

// setEnabled enables or disables a proxy: disabled, it drops every connection and refuses new
// ones.
func (tp *toxiproxy) setEnabled(ctx context.Context, proxy string, enabled bool) error {
	return tp.call(ctx, http.MethodPost, "/proxies/"+proxy, map[string]any{"enabled": enabled}, nil)
}

// addToxic adds a toxic to a proxy's stream ("upstream" or "downstream").
func (tp *toxiproxy) addToxic(ctx context.Context, proxy, name, typ, stream string, attrs map[string]any) error {
	return tp.call(ctx, http.MethodPost, "/proxies/"+proxy+"/toxics", map[string]any{
		"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs,
	}, nil)
}

// removeToxic removes a toxic.
func (tp *toxiproxy) removeToxic(ctx context.Context, proxy, name string) error {
	return tp.call(ctx, http.MethodDelete, "/proxies/"+proxy+"/toxics/"+name, nil, nil)
}

// reset enables every proxy and removes every toxic.
func (tp *toxiproxy) reset(ctx context.Context) error {
	return tp.call(ctx, http.MethodPost, "/reset", nil, nil)
}

func (tp *toxiproxy) stop() { tp.proc.kill() }
