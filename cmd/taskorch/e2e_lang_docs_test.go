package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/push"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The pages "Use taskorch from Python" and "from TypeScript" (docs/python.md, docs/typescript.md),
// run as they are printed: their blocks are taken from the documents, written to files and run
// against a new database, a real `taskorch worker` and the documents' own push endpoints.

// docLang is one language's page and how to run its files.
type docLang struct {
	doc    string // the page in docs/
	prefix string // its examples are <prefix>-setup, <prefix>-app, <prefix>-endpoint
	ext    string // the files' extension, with its dot
	// dir is where the files are written; command returns the command that runs file there.
	dir     string
	command func(ctx context.Context, file string, args ...string) *exec.Cmd
}

// TestE2EDocPython runs docs/python.md (psycopg2, and a push endpoint on Python's standard
// library) against a real worker. It needs a python3 that imports psycopg2 (make deps installs
// Debian's python3-psycopg2).
func TestE2EDocPython(t *testing.T) {
	t.Parallel()
	py := pythonWithPsycopg2(t)
	dir := t.TempDir()
	lang := docLang{doc: "python.md", prefix: "python", ext: ".py", dir: dir,
		command: func(ctx context.Context, file string, args ...string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, py, append([]string{"-u", file}, args...)...)
			cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1")
			return cmd
		}}
	writeDocFiles(t, lang, "orders_endpoint_modes.py")
	runLangDoc(t, lang)
}

// TestE2EDocTypeScript runs docs/typescript.md (node-postgres, and a push endpoint on node:http)
// against a real worker, after type-checking its files with tsc. It needs node and the packages
// of docs/snippets/typescript (npm ci there; make deps does it).
func TestE2EDocTypeScript(t *testing.T) {
	t.Parallel()
	modules := typescriptModules(t)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(modules, filepath.Join(dir, "node_modules")))
	pkg, err := os.ReadFile(filepath.Join(modules, "..", "package.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), pkg, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tsconfig.json"), []byte(docBlock(t, "typescript.md", "typescript-tsconfig")), 0o644))
	lang := docLang{doc: "typescript.md", prefix: "typescript", ext: ".ts", dir: dir,
		// node --import tsx is what tsx's command runs, without the second process it starts.
		command: func(ctx context.Context, file string, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, "node", append([]string{"--import", "tsx", file}, args...)...)
		}}
	writeDocFiles(t, lang, "orders_endpoint_modes.ts")

	// The page's files, and the driver that imports the endpoint, type-check under --strict.
	tsc := exec.Command(filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", "tsconfig.json")
	tsc.Dir = dir
	out, err := tsc.CombinedOutput()
	require.NoError(t, err, "tsc:\n%s", out)

	runLangDoc(t, lang)
}

// pythonWithPsycopg2 returns a python3 that imports psycopg2: Debian's (/usr/bin/python3, where
// apt's python3-psycopg2 installs it), else the one on PATH. Without one the test is skipped
// with what to install, except in CI, where it fails.
func pythonWithPsycopg2(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, "-c", "import psycopg2").CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, fmt.Sprintf("%s: %s", path, strings.TrimSpace(string(out))))
	}
	missing(t, "docs/python.md's test needs a python3 with psycopg2: apt-get install python3-psycopg2 (make deps installs it); tried: "+strings.Join(tried, "; "))
	return ""
}

// typescriptModules returns docs/snippets/typescript/node_modules once npm ci has filled it.
// Without it (or without node) the test is skipped with what to run, except in CI, where it fails.
func typescriptModules(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../docs/snippets/typescript")
	require.NoError(t, err)
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "docs/typescript.md's test needs Node.js: apt-get install nodejs npm (make deps installs them)")
	}
	for _, bin := range []string{"tsx", "tsc"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", bin)); err != nil {
			missing(t, "docs/typescript.md's test needs the packages of docs/snippets/typescript: run (cd docs/snippets/typescript && npm ci), or make deps: "+err.Error())
		}
	}
	return filepath.Join(dir, "node_modules")
}

// missing skips the test with why, or fails it in CI (CI is set), where everything is installed.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// writeDocFiles writes the page's application and endpoint as shop<ext> and
// orders_endpoint<ext>, and the test's driver of the endpoint from testdata/docs, into lang.dir.
func writeDocFiles(t *testing.T, lang docLang, driver string) {
	t.Helper()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(lang.dir, name), []byte(text), 0o644))
	}
	write("shop"+lang.ext, docBlock(t, lang.doc, lang.prefix+"-app"))
	write("orders_endpoint"+lang.ext, docBlock(t, lang.doc, lang.prefix+"-endpoint"))
	src, err := os.ReadFile(filepath.Join("testdata/docs", driver))
	require.NoError(t, err)
	write(driver, string(src))
}

// runLangDoc runs a page's setup, application and endpoint: see the pages' "How this page is
// tested".
func runLangDoc(t *testing.T, lang docLang) {
	ctx := context.Background()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)

	// The setup, as the owner; the role is cluster-wide, so its name is the test's own.
	role := "shop_app_" + randHex(t, 6)
	_, err := pool.Exec(ctx, strings.ReplaceAll(docBlock(t, lang.doc, lang.prefix+"-setup"), "shop_app", role))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(ctx, "drop owned by "+role+"; drop role "+role)
		require.NoError(t, err)
	})
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	u.User = neturl.UserPassword(role, "change-me")
	appURL := u.String()

	// The endpoints: the page's as printed, and the test's driver of its serve/verify/run. The
	// worker signs with two secrets, new then old (a rotation); the endpoints hold the old one,
	// after one of their own: each signature and each secret is tried.
	oldSecret, newSecret := pushSecret(t), pushSecret(t)
	held := pushSecret(t) + "," + oldSecret
	page := startLangEndpoint(t, lang, "orders_endpoint"+lang.ext, held)
	modes := startLangEndpoint(t, lang, "orders_endpoint_modes"+lang.ext, held)
	startWorkerProc(t, url,
		envHTTPTargets+"=orders.confirm="+page.url("/")+",orders.test="+modes.url("/"),
		envHTTPSecrets+"="+newSecret+","+oldSecret)

	// The application: an order and its task in one transaction; the same request again is the
	// same order and task.
	app := func(args ...string) map[string]json.RawMessage {
		t.Helper()
		stdout, stderr, code := runLangApp(t, lang, appURL, args...)
		require.Equal(t, 0, code, "shop %v: %s", args, stderr)
		var doc map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
		return doc
	}
	placed := app("order", "req-7f3a", "Ada", "4200")
	orderID, taskID := docID(t, placed, "order_id", "orderId"), docID(t, placed, "task_id", "taskId")
	again := app("order", "req-7f3a", "Ada", "4200")
	require.Equal(t, orderID, docID(t, again, "order_id", "orderId"))
	require.Equal(t, taskID, docID(t, again, "task_id", "taskId"))
	require.Equal(t, 1, q[int](t, pool, `select count(*)::int from public.orders where request_id = 'req-7f3a'`))
	require.Equal(t, 1, q[int](t, pool, `select count(*)::int from queues.task where task_type = 'orders.confirm'`))
	require.Equal(t, role, q[string](t, pool, `select enqueued_by from queues.task where task_id = $1`, taskID))
	require.Equal(t, fmt.Sprintf("confirm-order:%d", orderID), q[string](t, pool, `select idempotency_key from queues.task where task_id = $1`, taskID))

	// The worker pushed it to the page's endpoint; wait returns the endpoint's answer as the result.
	done := app("wait", strconv.FormatInt(taskID, 10))
	require.JSONEq(t, `"completed"`, string(done["status"]))
	require.JSONEq(t, `1`, string(done["attempt"]))
	want := fmt.Sprintf(`{"order_id": %d, "message": "Thank you, Ada: order %d is confirmed."}`, orderID, orderID)
	require.JSONEq(t, want, string(done["result"]))
	require.JSONEq(t, want, pushResult(t, pool, taskID))
	require.JSONEq(t, `"completed"`, string(app("status", strconv.FormatInt(taskID, 10))["status"]))

	// A signal: recorded once.
	require.JSONEq(t, `true`, string(app("paid", strconv.FormatInt(orderID, 10), "4200")["recorded"]))
	require.JSONEq(t, `false`, string(app("paid", strconv.FormatInt(orderID, 10), "1")["recorded"]))
	require.JSONEq(t, `{"amount_cents": 4200}`, q[string](t, pool,
		`select payload::text from queues.signal where name = 'payment.settled' and key = $1`, strconv.FormatInt(orderID, 10)))

	// Another role's task: the application cannot see it, and says so.
	foreign := enqueue(t, pool, "taskorch.noop", `{}`, 0)
	_, stderr, code := runLangApp(t, lang, appURL, "wait", strconv.FormatInt(foreign, 10))
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, fmt.Sprintf("task %d: no such task, or not enqueued by this role", foreign))

	// The endpoint's outcomes, through the worker: 429 snoozes without an attempt, Refuse fails
	// without retry, an error is retried.
	tooMany := enqueue(t, pool, "orders.test", `{"mode": "429-then-ok"}`, 0)
	refused := enqueue(t, pool, "orders.test", `{"mode": "refuse"}`, 0)
	failing := enqueue(t, pool, "orders.test", `{"mode": "error-then-ok"}`, 0)
	waitStatus(t, pool, tooMany, "completed")
	waitStatus(t, pool, refused, "failed")
	waitStatus(t, pool, failing, "completed")
	attempt := func(id int64) int { return q[int](t, pool, `select attempt from queues.task where task_id = $1`, id) }
	require.Equal(t, 1, attempt(tooMany), "a 429 spends no attempt")
	require.JSONEq(t, `{"mode": "429-then-ok", "calls": 2}`, pushResult(t, pool, tooMany))
	require.Equal(t, 1, attempt(refused), "a 4xx is not retried")
	refusedErr := q[string](t, pool, `select last_error from queues.task where task_id = $1`, refused)
	require.Contains(t, refusedErr, "HTTP 422 Unprocessable Entity")
	require.Contains(t, refusedErr, "no such order")
	require.Equal(t, 2, attempt(failing), "a 5xx is retried")
	require.Contains(t, pushErrors(t, pool, failing), "HTTP 500 Internal Server Error")
	require.Contains(t, pushErrors(t, pool, failing), "the database is on fire")
	require.JSONEq(t, `{"mode": "error-then-ok", "calls": 2}`, pushResult(t, pool, failing))

	// Straight to the endpoint: a bad signature, a stale timestamp, one request twice, a new run.
	// The Idempotency-Keys are lease ids this test's database never gave out.
	keys, err := push.ParseSecrets(newSecret+","+oldSecret, "secrets")
	require.NoError(t, err)
	otherKeys, err := push.ParseSecrets(pushSecret(t), "secrets")
	require.NoError(t, err)
	const fake = 990001
	body := []byte(fmt.Sprintf(`{"task_id": %d, "task_type": "orders.test", "payload": {"mode": "ok"}, "attempt": 1}`, fake))
	now := time.Now().Unix()
	status, answer := postSigned(t, modes.url("/"), otherKeys, now, "880001", body)
	require.Equal(t, http.StatusUnauthorized, status, answer)
	status, answer = postSigned(t, modes.url("/"), keys, now-600, "880001", body)
	require.Equal(t, http.StatusUnauthorized, status, "a timestamp ten minutes old: %s", answer)
	status, first := postSigned(t, modes.url("/"), keys, now, "880001", body)
	require.Equal(t, http.StatusOK, status, first)
	require.JSONEq(t, `{"mode": "ok", "calls": 1}`, first, "the refused requests did not run the work")
	status, replay := postSigned(t, modes.url("/"), keys, now, "880001", body)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, first, replay, "the same Idempotency-Key: the same answer")
	status, rerun := postSigned(t, modes.url("/"), keys, now, "880002", body)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, first, rerun, "a new run of a task that is done: its result, the work not run again")
	// An answer that was not a 2xx is kept for its key too; a new run works again.
	failBody := []byte(fmt.Sprintf(`{"task_id": %d, "task_type": "orders.test", "payload": {"mode": "error-then-ok"}, "attempt": 1}`, fake+1))
	status, failed := postSigned(t, modes.url("/"), keys, now, "880003", failBody)
	require.Equal(t, http.StatusInternalServerError, status, failed)
	status, replay = postSigned(t, modes.url("/"), keys, now, "880003", failBody)
	require.Equal(t, http.StatusInternalServerError, status, replay)
	require.JSONEq(t, failed, replay, "the same Idempotency-Key: the same answer, the work not run again")
	status, rerun = postSigned(t, modes.url("/"), keys, now, "880004", failBody)
	require.Equal(t, http.StatusOK, status, rerun)
	require.JSONEq(t, `{"mode": "error-then-ok", "calls": 2}`, rerun)

	// The endpoint printed the work's call before answering it: one line, from the first request.
	select {
	case <-modes.out.lineWith(`"work"`, fmt.Sprintf(`%d,`, fake)):
	case <-time.After(60 * time.Second):
		t.Fatalf("the endpoint printed no work line for task %d:\n%s", fake, modes.out.String())
	}
	require.Len(t, modes.events(t, "work", fake), 1)
}

// randHex returns n random bytes in hex.
func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// docID reads an id the application printed, under either name (Python's snake_case or
// TypeScript's camelCase), as a number or, as pg returns bigints, a string.
func docID(t *testing.T, doc map[string]json.RawMessage, names ...string) int64 {
	t.Helper()
	for _, name := range names {
		if raw, ok := doc[name]; ok {
			id, err := strconv.ParseInt(strings.Trim(string(raw), `"`), 10, 64)
			require.NoError(t, err, "%s: %s", name, raw)
			return id
		}
	}
	t.Fatalf("no %v in %v", names, doc)
	return 0
}

// runLangApp runs the page's application (shop) with args as the application's role and
// returns its output and exit code.
func runLangApp(t *testing.T, lang docLang, appURL string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := lang.command(ctx, "shop"+lang.ext, args...)
	cmd.Dir = lang.dir
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+appURL)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	require.NoError(t, err, "shop %v: %s", args, errOut.String())
	return out.String(), errOut.String(), 0
}

// startLangEndpoint runs file of lang.dir with secret as its TASKORCH_HTTP_TARGET_SECRETS and
// PORT=0, and waits until it says which port it listens on.
func startLangEndpoint(t *testing.T, lang docLang, file, secret string) *pushEndpoint {
	t.Helper()
	cmd := lang.command(context.Background(), file)
	cmd.Dir = lang.dir
	cmd.Env = append(cmd.Environ(), "PORT=0", envHTTPSecrets+"="+secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed with whatever it starts
	e := &pushEndpoint{cmd: cmd, out: &syncBuffer{}}
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = e.out, &stderr
	listening := e.out.lineWith(`"event"`, `"listening"`)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("endpoint %s stdout:\n%s\nstderr:\n%s", file, e.out.String(), stderr.String())
		}
	})
	var line string
	select {
	case line = <-listening:
	case err := <-exited:
		t.Fatalf("the endpoint %s exited before listening (%v):\n%s", file, err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the endpoint %s did not listen within 60 s:\n%s", file, stderr.String())
	}
	var ev pushEvent
	require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
	require.Positive(t, ev.Port, line)
	e.port = ev.Port
	return e
}

// postSigned POSTs body to url as the worker would, signed with keys at timestamp ts, with
// Idempotency-Key key, and returns the answer's status and body.
func postSigned(t *testing.T, url string, keys [][]byte, ts int64, key string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	id := "taskorch-test-" + key
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", push.Sign(keys, id, ts, body))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
