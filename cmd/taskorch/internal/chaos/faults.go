package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Fault kinds, in the order of the report.
const (
	FaultKill         = "kill"
	FaultPause        = "pause"
	FaultPGRestart    = "pg_restart"
	FaultPGCrash      = "pg_crash"
	FaultLatency      = "latency"
	FaultReset        = "reset_peer"
	FaultProxyDown    = "proxy_down"
	FaultRedisRestart = "redis_restart"
	FaultNetnsCut     = "netns_cut"
)

// FaultKinds lists every kind, in the order of the report.
var FaultKinds = []string{FaultKill, FaultPause, FaultPGRestart, FaultPGCrash, FaultLatency, FaultReset,
	FaultProxyDown, FaultRedisRestart, FaultNetnsCut}

// FaultNames describe the kinds in the report.
var FaultNames = map[string]string{
	FaultKill:         "worker SIGKILL, then started again",
	FaultPause:        "worker SIGSTOP past its lease, then SIGCONT",
	FaultPGRestart:    "PostgreSQL fast restart",
	FaultPGCrash:      "PostgreSQL crash (SIGQUIT) and restart",
	FaultLatency:      "toxiproxy latency",
	FaultReset:        "toxiproxy connection resets (reset_peer)",
	FaultProxyDown:    "toxiproxy proxy disabled",
	FaultRedisRestart: "Redis restart (redis transport)",
	FaultNetnsCut:     "network namespace cut off, then healed",
}

// errNoTarget: the fault had nothing to act on (no free worker); not counted.
var errNoTarget = errors.New("no target")

// inject applies one fault of kind and returns what it did, for the log. Every fault undoes
// itself before returning (a paused worker continued, a toxic removed, a link healed), so the
// run can end after any of them.
func (e *env) inject(ctx context.Context, kind string) (string, error) {
	switch kind {
	case FaultKill:
		return e.killWorker(ctx)
	case FaultPause:
		return e.pauseWorker(ctx)
	case FaultPGRestart:
		return e.restartPostgres(ctx, false)
	case FaultPGCrash:
		return e.restartPostgres(ctx, true)
	case FaultLatency:
		latency, jitter := 50+e.rng.IntN(200), e.rng.IntN(100)
		hold := e.rng.between(4*time.Second, 10*time.Second)
		for _, stream := range []string{"upstream", "downstream"} {
			if err := e.proxy.addToxic(ctx, "pg", "latency_"+stream, "latency", stream,
				map[string]any{"latency": latency, "jitter": jitter}); err != nil {
				return "", err
			}
		}
		e.sleep(ctx, hold)
		for _, stream := range []string{"upstream", "downstream"} {
			if err := e.proxy.removeToxic(context.WithoutCancel(ctx), "pg", "latency_"+stream); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("%d±%d ms each way for %s", latency, jitter, hold.Round(time.Millisecond)), nil
	case FaultReset:
		timeout, hold := e.rng.IntN(500), e.rng.between(1500*time.Millisecond, 4*time.Second)
		if err := e.proxy.addToxic(ctx, "pg", "reset", "reset_peer", "upstream", map[string]any{"timeout": timeout}); err != nil {
			return "", err
		}
		e.sleep(ctx, hold)
		if err := e.proxy.removeToxic(context.WithoutCancel(ctx), "pg", "reset"); err != nil {
			return "", err
		}
		return fmt.Sprintf("every connection reset after %d ms, for %s", timeout, hold.Round(time.Millisecond)), nil
	case FaultProxyDown:
		hold := e.rng.between(2*time.Second, 5*time.Second)
		if err := e.proxy.setEnabled(ctx, "pg", false); err != nil {
			return "", err
		}
		e.sleep(ctx, hold)
		if err := e.proxy.setEnabled(context.WithoutCancel(ctx), "pg", true); err != nil {
			return "", err
		}
		return fmt.Sprintf("for %s", hold.Round(time.Millisecond)), nil
	case FaultRedisRestart:
		down := e.rng.between(500*time.Millisecond, 3*time.Second)
		if err := e.redis.restart(ctx, down); err != nil {
			return "", err
		}
		return fmt.Sprintf("down %s, everything it held lost", down.Round(time.Millisecond)), nil
	case FaultNetnsCut:
		return e.cutNetns(ctx)
	}
	return "", fmt.Errorf("unknown fault %q", kind)
}

// sleep waits d, or less if ctx ends.
func (e *env) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (e *env) killWorker(ctx context.Context) (string, error) {
	s := e.fleet.acquire(e.rng.IntN, nil)
	if s == nil {
		return "", errNoTarget
	}
	defer e.fleet.release(s)
	id := fmt.Sprintf("%s-%d (pid %d)", s.name, s.gen, s.proc.pid())
	same := e.sameIDNext()
	e.recordKill(kill{Worker: fmt.Sprintf("%s-%d", s.name, s.gen), At: time.Now(), SameID: same})
	s.proc.kill()
	down := e.rng.between(200*time.Millisecond, 2*time.Second)
	e.sleep(ctx, down)
	if err := e.fleet.restart(s, same); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, started again after %s as %s-%d", id, down.Round(time.Millisecond), s.name, s.gen), nil
}

func (e *env) pauseWorker(ctx context.Context) (string, error) {
	s := e.fleet.acquire(e.rng.IntN, nil)
	if s == nil {
		return "", errNoTarget
	}
	defer e.fleet.release(s)
	// Past the lease, and sometimes past the worker timeout too (then the leader reaps it).
	hold := e.cfg.LeaseDuration + e.rng.between(500*time.Millisecond, 6*time.Second)
	if err := s.proc.pause(); err != nil {
		return "", err
	}
	e.sleep(ctx, hold)
	if err := s.proc.resume(); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%d (pid %d) for %s", s.name, s.gen, s.proc.pid(), hold.Round(time.Millisecond)), nil
}

// restartPostgres stops PostgreSQL — a fast shutdown, or a crash (SIGQUIT to the postmaster:
// immediate, no checkpoint; recovery replays the WAL) — and starts it again at the same port.
func (e *env) restartPostgres(ctx context.Context, crash bool) (string, error) {
	e.pgMu.Lock()
	defer e.pgMu.Unlock()
	start := time.Now()
	if crash {
		pid, err := postmasterPID(e.cluster.DataDir())
		if err != nil {
			return "", err
		}
		if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
			return "", fmt.Errorf("SIGQUIT the postmaster: %w", err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				return "", fmt.Errorf("the postmaster (pid %d) did not exit after SIGQUIT", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	} else if err := e.cluster.Stop(context.WithoutCancel(ctx)); err != nil {
		return "", err
	}
	down := e.rng.between(200*time.Millisecond, 2*time.Second)
	e.sleep(ctx, down)
	c, err := startPostgres(context.WithoutCancel(ctx), e.pgCfg)
	if err != nil {
		return "", err
	}
	e.cluster = c
	return fmt.Sprintf("down %s, back after %s", down.Round(time.Millisecond), time.Since(start).Round(time.Millisecond)), nil
}

// postmasterPID reads the postmaster's pid from its pid file.
func postmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

func (e *env) cutNetns(ctx context.Context) (string, error) {
	if len(e.netns) == 0 {
		return "", errNoTarget
	}
	e.mu.Lock()
	n := e.netns[e.cuts%len(e.netns)]
	method := cutMethods[(e.cuts/len(e.netns))%len(cutMethods)]
	e.cuts++
	e.mu.Unlock()
	hold := e.rng.between(e.cfg.LeaseDuration+time.Second, 14*time.Second)
	if err := n.cutOff(ctx, method); err != nil {
		return "", err
	}
	e.sleep(ctx, hold)
	if err := n.heal(context.WithoutCancel(ctx)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s by %s for %s", n.name, method, hold.Round(time.Millisecond)), nil
}
