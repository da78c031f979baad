package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/taskorch/taskorch/internal/testing/redistest"
)

// redisServer is a redis-server run by the harness on 127.0.0.1 without persistence, so that a
// restart loses every message it held.
type redisServer struct {
	bin, dir, logPath string
	port              int
	proc              *process
}

func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed: run scripts/install-deps.sh (apt package redis-server): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{bin: bin, dir: dir, logPath: filepath.Join(dir, "redis.log"), port: port}
	return r, r.start(ctx)
}

// url is the server's redis:// URL.
func (r *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// start starts the server at its port and waits until it answers PING.
func (r *redisServer) start(ctx context.Context) error {
	p, err := startProcess(processSpec{name: "redis-server", logPath: r.logPath, argv: []string{r.bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(r.port), "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning"}})
	if err != nil {
		return err
	}
	r.proc = p
	deadline := time.Now().Add(15 * time.Second)
	for !redistest.Ping(r.addr()) {
		if time.Now().After(deadline) || p.exited() {
			p.kill()
			return fmt.Errorf("redis-server on %s did not answer (log: %s)", r.addr(), r.logPath)
		}
		select {
		case <-ctx.Done():
			p.kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// restart kills the server (losing everything it held), waits down, and starts it again at
// the same address.
func (r *redisServer) restart(ctx context.Context, down time.Duration) error {
	r.proc.kill()
	select {
	case <-ctx.Done():
	case <-time.After(down):
	}
	var err error
	for range 20 { // the port may linger for a moment
		if err = r.start(context.WithoutCancel(ctx)); err == nil {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

func (r *redisServer) stop() {
	if r.proc != nil {
		r.proc.kill()
	}
}
