package pgcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Basebackup copies the running cluster into dataDir as a streaming standby of it
// (pg_basebackup -R: standby.signal and primary_conninfo pointing at this server). Start the
// standby with Start and a Config whose DataDir is dataDir. dataDir must not exist or be empty.
// The cluster must accept replication connections from 127.0.0.1 as postgres without a
// password (what Start's trust authentication configures).
func (c *Cluster) Basebackup(ctx context.Context, dataDir string) error {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := c.r.prepareDataDir(ctx, abs); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if _, err := c.r.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "postgres",
		"-D", abs, "-R", "-X", "stream", "-c", "fast", "-w"); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// Promote ends recovery on a standby: it becomes a primary that accepts writes
// (pg_ctl promote, waiting until it does).
func (c *Cluster) Promote(ctx context.Context) error {
	if _, err := c.r.run(ctx, "pg_ctl", "promote", "-D", c.dataDir, "-w", "-t", "60"); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// Crash kills the server as a machine that died would: the postmaster is stopped, then it and
// every process it started get SIGKILL at once, so nothing more is written, flushed or sent to
// a standby. Start on the same data dir brings it back through crash recovery. Stop afterwards
// is a no-op.
func (c *Cluster) Crash() error {
	raw, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("pgcluster: crash: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("pgcluster: crash: postmaster.pid: %w", err)
	}
	// Stopped first, the postmaster can start no new process while its children are killed.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pgcluster: crash: %w", err)
	}
	for _, child := range childrenOf(pid) {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("pgcluster: crash: %w", err)
	}
	// Crashed means gone: wait until the postmaster has died (gone, or a zombie its parent has
	// not reaped yet), so that what follows — a restart on the same data directory — never sees
	// it alive one moment and gone the next.
	for deadline := time.Now().Add(30 * time.Second); !processGone(pid); {
		if time.Now().After(deadline) {
			return fmt.Errorf("pgcluster: crash: the postmaster (pid %d) is still alive 30 s after SIGKILL", pid)
		}
		time.Sleep(5 * time.Millisecond) //nolint:forbidigo // polling /proc for a process's death
	}
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	return nil
}

// processGone reports whether pid no longer runs: no such process, or a zombie (dead, not yet
// reaped).
func processGone(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return syscall.Kill(pid, 0) != nil
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	fields := strings.Fields(s[i+1:])
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) >= 2 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
