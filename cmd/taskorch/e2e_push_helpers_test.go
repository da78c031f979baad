package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Helpers of the push workers' end-to-end tests (docs/worker.md, "Push workers"): a real HTTP
// endpoint in Python, the example of the document or testdata/push/push_server.py, which uses
// the example's signature check.

// pushSecret returns a new signing secret, whsec_ and the base64 of 32 random bytes.
func pushSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// pushEndpoint is a Python endpoint running as a separate process.
type pushEndpoint struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	port int
}

// url is the endpoint's URL with path.
func (e *pushEndpoint) url(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", e.port, path)
}

// pushEvent is one line the test endpoint prints.
type pushEvent struct {
	Event          string            `json:"event"`
	Port           int               `json:"port"`
	TaskID         int64             `json:"task_id"`
	Call           int               `json:"call"`
	Mode           string            `json:"mode"`
	Attempt        int               `json:"attempt"`
	MaxAttempts    int               `json:"max_attempts"`
	LeaseID        int64             `json:"lease_id"`
	IdempotencyKey string            `json:"idempotency_key"`
	Deadline       string            `json:"deadline"`
	BodyDeadline   string            `json:"body_deadline"`
	WebhookID      string            `json:"webhook_id"`
	Signatures     int               `json:"signatures"`
	WorkflowID     *int64            `json:"workflow_id"`
	Parents        []json.RawMessage `json:"parents"`
}

// events returns the lines of kind event the endpoint printed for task id (every task: 0).
func (e *pushEndpoint) events(t *testing.T, event string, id int64) []pushEvent {
	t.Helper()
	var out []pushEvent
	for _, line := range strings.Split(e.out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var ev pushEvent
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		if ev.Event == event && (id == 0 || ev.TaskID == id) {
			out = append(out, ev)
		}
	}
	return out
}

// waitEvent waits for the endpoint's line of kind event about task id.
func (e *pushEndpoint) waitEvent(t *testing.T, event string, id int64) {
	t.Helper()
	select {
	case <-e.out.lineWith(`"event":"`+event+`"`, fmt.Sprintf(`"task_id":%d,`, id)):
	case <-time.After(60 * time.Second):
		t.Fatalf("the endpoint printed no %s line for task %d within 60 s:\n%s", event, id, e.out.String())
	}
}

// waitCalls waits for the endpoint's line about the n-th request of task id: the lines reach the
// test through a pipe, which may lag behind the answers the endpoint sent.
func (e *pushEndpoint) waitCalls(t *testing.T, id int64, n int) {
	t.Helper()
	select {
	case <-e.out.lineWith(`"event":"request"`, fmt.Sprintf(`"task_id":%d,"call":%d,`, id, n)):
	case <-time.After(60 * time.Second):
		t.Fatalf("the endpoint printed no line for request %d of task %d within 60 s:\n%s", n, id, e.out.String())
	}
}

// requirePython returns the path of python3, or fails the test: the push tests need a real
// endpoint in another language, and python3 is a documented dependency of the test suite here.
func requirePython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not on PATH: the push worker tests run their HTTP endpoint in Python (standard library only); install python3: %v", err)
	}
	return py
}

// startPushEndpoint writes the example endpoint of docs/worker.md into a temp dir as
// push_endpoint.py and runs script there (push_endpoint.py itself, or a script of testdata/push
// that imports it), with secrets as the endpoint's TASKORCH_HTTP_TARGET_SECRETS and PORT=0; it
// waits until the endpoint says which port it listens on.
func startPushEndpoint(t *testing.T, script, secrets string) *pushEndpoint {
	t.Helper()
	py := requirePython(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "push_endpoint.py"), []byte(docBlock(t, "worker.md", "push-endpoint")), 0o644))
	path := filepath.Join(dir, "push_endpoint.py")
	if script != "push_endpoint.py" {
		src, err := os.ReadFile(filepath.Join("testdata/push", script))
		require.NoError(t, err)
		path = filepath.Join(dir, script)
		require.NoError(t, os.WriteFile(path, src, 0o644))
	}
	cmd := exec.Command(py, "-u", path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PORT=0", envHTTPSecrets+"="+secrets, "PYTHONDONTWRITEBYTECODE=1")
	e := &pushEndpoint{cmd: cmd, out: &syncBuffer{}}
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = e.out, &stderr
	listening := e.out.lineWith(`"event": "listening"`)
	listening2 := e.out.lineWith(`"event":"listening"`)
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("endpoint %s stdout:\n%s\nstderr:\n%s", script, e.out.String(), stderr.String())
		}
	})
	var line string
	select {
	case line = <-listening:
	case line = <-listening2:
	case err := <-done:
		t.Fatalf("the Python endpoint %s exited before listening (%v):\n%s", script, err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the Python endpoint %s did not listen within 30 s:\n%s", script, stderr.String())
	}
	var ev pushEvent
	require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
	require.Positive(t, ev.Port, line)
	e.port = ev.Port
	return e
}
