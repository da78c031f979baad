// Package redistest starts a real redis-server for a test: on 127.0.0.1, at a free port, with
// no persistence, in the test's temp dir; stopped when the test ends. A test can stop it and
// start it again at the same address (a Redis restart: everything it held is gone).
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server run for a test.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts a redis-server for t, or fails t (naming scripts/install-deps.sh when the binary
// is missing).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server is not installed; run scripts/install-deps.sh (apt package redis-server): %v", err)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t)}
	s.StartAgain()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL, database db.
func (s *Server) URL(db int) string {
	return fmt.Sprintf("redis://127.0.0.1:%d/%d", s.port, db)
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// StartAgain starts the server (after Stop) at the same address, and waits until it answers.
func (s *Server) StartAgain() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(s.bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no",
		"--loglevel", "warning", "--logfile", "")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: starting redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !Ping(s.Addr()) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			s.t.Fatalf("redistest: redis-server on %s did not answer within 10s: %s", s.Addr(), out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.cmd = cmd
}

// Stop kills the server (as a crash would: nothing is saved). It may be called twice.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Ping sends PING to the Redis server at addr and reports whether it answered +PONG within a
// second.
func Ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: finding a free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
