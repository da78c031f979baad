// Package pgbouncertest starts a real PgBouncer for a test, in front of the test's PostgreSQL
// server: on 127.0.0.1, at a free port, in transaction mode unless told otherwise; stopped when
// the test ends. It is how the tests check that taskorch works behind a transaction pooler
// (docs/operations.md, "Production topology").
package pgbouncertest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options configures a PgBouncer.
type Options struct {
	// Mode is PgBouncer's pool_mode: "transaction" (the default), "session" or "statement".
	Mode string
	// Users may log in (trust authentication, forwarded to the server as themselves; the
	// server URL's user with its password, the others without). Defaults to the server URL's
	// user.
	Users []string
	// PoolSize is default_pool_size: server connections per database and user. Defaults to 10.
	PoolSize int
}

// Bouncer is a pgbouncer process run for a test.
type Bouncer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	ini  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	out    *logBuffer
	exited chan struct{}
}

// Start starts PgBouncer in front of the PostgreSQL server of serverURL (a postgres:// URL;
// only its host and port are used: every database on it is reachable through the bouncer), or
// fails t, naming scripts/install-deps.sh when pgbouncer is not installed.
func Start(t testing.TB, serverURL string, opts Options) *Bouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/pgbouncer"); statErr != nil {
			t.Fatalf("pgbouncertest: pgbouncer is not installed; run scripts/install-deps.sh (apt package pgbouncer): %v", err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("pgbouncertest: server URL: %v", err)
	}
	if opts.Mode == "" {
		opts.Mode = "transaction"
	}
	if len(opts.Users) == 0 {
		opts.Users = []string{u.User.Username()}
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 10
	}
	// Not t.TempDir: as root, PgBouncer runs as the postgres user (it refuses to run as root),
	// which must read its files and cannot enter a test's private temp dir.
	dir, err := os.MkdirTemp("", "pgbouncertest-")
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // a config and a user list without secrets
		t.Fatalf("pgbouncertest: %v", err)
	}
	b := &Bouncer{t: t, bin: bin, dir: dir, port: freePort(t)}
	var users strings.Builder
	for _, name := range opts.Users {
		// PgBouncer logs in to the server with the password of its auth_file.
		pw, _ := u.User.Password()
		if name != u.User.Username() {
			pw = ""
		}
		fmt.Fprintf(&users, "%q %q\n", name, pw)
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 500
server_reset_query = DISCARD ALL
ignore_startup_parameters = extra_float_digits
logfile =
`, u.Hostname(), portOf(u), b.port, filepath.Join(dir, "users.txt"), opts.Mode, opts.PoolSize)
	b.ini = filepath.Join(dir, "pgbouncer.ini")
	for name, content := range map[string]string{"users.txt": users.String(), "pgbouncer.ini": ini} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil { //nolint:gosec // see above
			t.Fatalf("pgbouncertest: %v", err)
		}
	}
	b.StartAgain()
	t.Cleanup(b.Stop)
	return b
}

// URL is databaseURL (a URL of a database on the server) with the bouncer's address instead of
// the server's: the same database and user, through the pooler.
func (b *Bouncer) URL(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		b.t.Fatalf("pgbouncertest: database URL: %v", err)
	}
	u.Host = b.Addr()
	return u.String()
}

// Addr is the bouncer's host:port.
func (b *Bouncer) Addr() string { return "127.0.0.1:" + strconv.Itoa(b.port) }

// StartAgain starts the bouncer (after Stop) at the same address and waits until it accepts
// connections.
func (b *Bouncer) StartAgain() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return
	}
	args := []string{b.ini}
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root; -u makes it switch user at start.
		runAs := "postgres"
		if _, err := user.Lookup(runAs); err != nil {
			b.t.Fatalf("pgbouncertest: running as root needs a postgres user to run PgBouncer as: %v", err)
		}
		args = append([]string{"-u", runAs}, args...)
	}
	cmd := exec.Command(b.bin, args...)
	out := &logBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("pgbouncertest: starting pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.Addr(), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-exited:
			b.t.Fatalf("pgbouncertest: pgbouncer exited at start: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			b.t.Fatalf("pgbouncertest: pgbouncer on %s did not accept connections within 10s: %s", b.Addr(), out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.cmd, b.out = cmd, out
	b.exited = exited
}

// Stop kills the bouncer at once (SIGKILL: its clients' connections drop, as in a crash). It may
// be called twice.
func (b *Bouncer) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
	b.cmd = nil
}

// Log is what PgBouncer has written so far (its log goes to stderr).
func (b *Bouncer) Log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.out == nil {
		return ""
	}
	return b.out.String()
}

// logBuffer collects the process's output; exec's copying goroutines write while Log reads.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return "5432"
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgbouncertest: finding a free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
