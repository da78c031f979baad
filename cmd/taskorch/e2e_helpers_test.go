package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/pgcluster"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// e2eVersion is the version the end-to-end tests' binary is built with, as make release sets
// one (TestE2EVersion).
const e2eVersion = "v0.0.0-e2e"

// taskorchBinary builds the taskorch command once per test run, into a temporary directory that
// is removed when the test binary exits, however it exits (removeWhenDone).
func taskorchBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "taskorch-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		if err := removeWhenDone(dir); err != nil {
			_ = os.RemoveAll(dir)
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "taskorch")
		out, err := exec.Command("go", "build", "-o", binPath, "-ldflags", "-X main.version="+e2eVersion, ".").CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// removeWhenDone starts a small shell that removes dir when this process exits: it waits to
// read from a pipe whose write end only this process holds, which the kernel closes at any
// exit, a crash or SIGKILL included. (The test database harness's private cluster is cleaned
// up the same way.)
func removeWhenDone(dir string) error {
	pr, pw, err := os.Pipe() // close-on-exec: no child of ours inherits pw
	if err != nil {
		return err
	}
	defer func() { _ = pr.Close() }()
	cmd := exec.Command("/bin/sh", "-c", `read -r _; rm -rf -- "$1"`, "taskorch-e2e-cleanup", dir)
	cmd.Stdin = pr
	cmd.Dir = "/"
	// Its own process group, so that a Ctrl-C to the terminal's group leaves it to clean up; no
	// stdout or stderr, so that go test does not wait for it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = pw.Close()
		return err
	}
	go func() { _ = cmd.Wait() }()
	cleanupMu.Lock()
	cleanupPipes = append(cleanupPipes, pw) // kept open, and referenced, until the process exits
	cleanupMu.Unlock()
	return nil
}

// cleanupPipes are the write ends of removeWhenDone's pipes, one per directory: each is kept
// referenced, since a pipe's *os.File that is garbage-collected is closed, which would remove its
// directory while the tests still use it.
var (
	cleanupMu    sync.Mutex
	cleanupPipes []*os.File
)

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// proc is a taskorch worker running as a separate process.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	waits []lineWait
}

// lineWait is a wait for a line that contains every one of parts.
type lineWait struct {
	parts []string
	ch    chan string
}

func (w lineWait) matches(line string) bool {
	for _, p := range w.parts {
		if !strings.Contains(line, p) {
			return false
		}
	}
	return true
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waits) > 0 {
		// Whole lines only: the line p ends, from where it began in what was written before.
		start := bytes.LastIndexByte(s.b.Bytes(), '\n') + 1
		text := string(s.b.Bytes()[start:]) + string(p)
		kept := s.waits[:0]
		for _, w := range s.waits {
			if line, ok := firstLineFor(text, w); ok {
				w.ch <- line
				continue
			}
			kept = append(kept, w)
		}
		s.waits = kept
	}
	return s.b.Write(p)
}

// lineWith returns a channel that gets the first complete line, written before or after the
// call, that contains every one of parts: a signal to wait on, not a poll.
func (s *syncBuffer) lineWith(parts ...string) <-chan string {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := lineWait{parts: parts, ch: make(chan string, 1)}
	if line, ok := firstLineFor(s.b.String(), w); ok {
		w.ch <- line
	} else {
		s.waits = append(s.waits, w)
	}
	return w.ch
}

// firstLineFor finds the first complete line of text that w waits for.
func firstLineFor(text string, w lineWait) (string, bool) {
	for {
		line, rest, ok := strings.Cut(text, "\n")
		if !ok {
			return "", false
		}
		if w.matches(line) {
			return line, true
		}
		text = rest
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startWorkerProc starts `taskorch worker` against url with extra environment variables. Its
// log is printed if the test fails; it is killed when the test ends.
func startWorkerProc(t *testing.T, url string, env ...string) *proc {
	t.Helper()
	return startProc(t, exec.Command(taskorchBinary(t), "worker"), url, env...)
}

// startProc starts cmd, a worker of some binary, on the database at url with debug JSON logs
// and env; it is killed when the test ends, and its output logged if the test failed.
func startProc(t *testing.T, cmd *exec.Cmd, url string, env ...string) *proc {
	t.Helper()
	cmd.Env = append(os.Environ(), append([]string{
		"DATABASE_URL=" + url,
		"TASKORCH_LOG_LEVEL=debug",
		"TASKORCH_LOG_FORMAT=json",
	}, env...)...)
	p := &proc{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(t, cmd.Start())
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.doneOrTimeout()
		if t.Failed() {
			t.Logf("worker %d log:\n%s", cmd.Process.Pid, p.out.String())
		}
	})
	return p
}

func (p *proc) doneOrTimeout() <-chan error {
	ch := make(chan error, 1)
	go func() {
		select {
		case err := <-p.done:
			p.done <- err // keep it for the next reader
			ch <- err
		case <-time.After(30 * time.Second):
			ch <- context.DeadlineExceeded
		}
	}()
	return ch
}

// waitStarted waits until the worker has called task id's handler (its debug line "task
// started"). A task's status says "running" from its claim on, also while it waits in the
// claim-ahead buffer, which a stopping worker gives back at once.
func (p *proc) waitStarted(t *testing.T, id int64) {
	t.Helper()
	select {
	case <-p.out.lineWith(`"msg":"task started"`, fmt.Sprintf(`"task_id":%d,`, id)):
	case <-time.After(30 * time.Second):
		t.Fatalf("task %d was not started within 30 s", id)
	}
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	err := <-p.doneOrTimeout()
	require.NotErrorIs(t, err, context.DeadlineExceeded, "worker did not exit")
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func q[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

func enqueue(t *testing.T, pool *pgxpool.Pool, typ, payload string, maxAttempts int) int64 {
	t.Helper()
	return q[int64](t, pool, `select queues.enqueue($1, $2::jsonb, _max_attempts => nullif($3, 0))`, typ, payload, maxAttempts)
}

// waitFor waits until sql (a boolean query) is true: the database is the signal.
func waitFor(t *testing.T, pool *pgxpool.Pool, what, sql string, args ...any) {
	t.Helper()
	require.Eventually(t, func() bool { return q[bool](t, pool, sql, args...) }, 60*time.Second, 10*time.Millisecond, what)
}

func waitStatus(t *testing.T, pool *pgxpool.Pool, id int64, status string) {
	t.Helper()
	waitFor(t, pool, "task status "+status, `select status::text = $2 from queues.task where task_id = $1`, id, status)
}

// privateClusterConfig describes a PostgreSQL of the test's own, in a temp dir, on a fixed free
// port so that it can be stopped and started again at the same address (the shared test server
// must not be restarted). As root PostgreSQL runs as the postgres user, so the temp dirs are
// made enterable.
func privateClusterConfig(t *testing.T) pgcluster.Config {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	return pgcluster.Config{DataDir: filepath.Join(dir, "pg"), Port: freePort(t), Settings: pgcluster.TestSettings()}
}
