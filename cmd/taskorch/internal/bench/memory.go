package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
)

// MemoryConfig configures Memory.
type MemoryConfig struct {
	// WorkerBinary is the taskorch binary to run as `taskorch worker`. Required.
	WorkerBinary string
	// Tasks is how many sleeping tasks run at once (the worker's concurrency). Defaults to 100.
	Tasks int
	// Sample is how long the RSS is sampled (every 100 ms) while the tasks run. Defaults to 2s.
	Sample time.Duration
}

// MemoryResult is Memory's result. Sizes are in MiB.
type MemoryResult struct {
	Header
	Tasks     int `json:"tasks"`
	WorkerPID int `json:"worker_pid"`
	// IdleRSSMB is the worker's VmRSS once registered, before any task.
	IdleRSSMB float64 `json:"idle_rss_mb"`
	// RSSMB is the highest VmRSS sampled while Tasks tasks were running; RSSBytes the same in
	// bytes.
	RSSMB    float64 `json:"rss_mb"`
	RSSBytes int64   `json:"rss_bytes"`
	// PeakRSSMB is VmHWM, the process's high-water mark, at the end of the sampling.
	PeakRSSMB float64 `json:"peak_rss_mb"`
}

// Table implements Result.
func (r *MemoryResult) Table() []Row {
	return append(r.headerRows(),
		Row{"worker", fmt.Sprintf("a separate `taskorch worker` process (pid %d), concurrency %d", r.WorkerPID, r.Tasks)},
		Row{"idle", fmt.Sprintf("%.1f MiB RSS", r.IdleRSSMB)},
		Row{"running", fmt.Sprintf("%.1f MiB RSS with %d sleeping tasks (peak %.1f MiB)", r.RSSMB, r.Tasks, r.PeakRSSMB)},
	)
}

// Memory runs `taskorch worker` as a child process on the benchmark database, gives it
// cfg.Tasks sleeping tasks at once, and reads its resident set size from /proc: the figure is
// the worker's alone, not the benchmark's.
func Memory(ctx context.Context, e *Env, cfg MemoryConfig) (*MemoryResult, error) {
	if cfg.WorkerBinary == "" {
		return nil, errors.New("bench: the memory mode needs the taskorch binary to run as a worker")
	}
	if cfg.Tasks <= 0 {
		cfg.Tasks = 100
	}
	if cfg.Sample <= 0 {
		cfg.Sample = 2 * time.Second
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		return nil, errors.New("bench: the memory mode reads /proc/PID/status (Linux)")
	}
	r := &MemoryResult{Header: e.header("memory"), Tasks: cfg.Tasks}
	id := "bench-memory-" + randomHex(3)

	var out limitedBuffer
	cmd := exec.Command(cfg.WorkerBinary, "worker") //nolint:gosec // the binary is the caller's choice
	cmd.Env = append(withoutTaskorchEnv(os.Environ()),
		"DATABASE_URL="+e.URL,
		"TASKORCH_MIGRATE=false",
		"TASKORCH_CONCURRENCY="+strconv.Itoa(cfg.Tasks),
		"TASKORCH_WORKER_ID="+id,
		"TASKORCH_SHUTDOWN_GRACE=1ms",
		"TASKORCH_LOG_LEVEL=warn",
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	e.progress.phase("memory: starting taskorch worker")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s worker: %w", cfg.WorkerBinary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			e.log.Debug("worker exited", "error", err)
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			err := <-exited
			e.log.Warn("the worker did not stop within 15 s of SIGTERM; killed it", "error", err)
		}
	}
	defer stop()
	pid := cmd.Process.Pid
	r.WorkerPID = pid

	waitFor := func(what, sql string, args ...any) error {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var ok bool
			if err := e.admin.QueryRow(ctx, sql, args...).Scan(&ok); err != nil {
				return err
			}
			if ok {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("bench: the worker did not %s within 30 s; its output:\n%s", what, out.String())
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-exited:
				stopped = true
				return fmt.Errorf("bench: the worker exited (%v); its output:\n%s", err, out.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if err := waitFor("register", `select exists (select 1 from queues.worker where worker_id = $1)`, id); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond) // let start-up settle
	idle, _, err := procMemory(pid)
	if err != nil {
		return nil, err
	}
	r.IdleRSSMB = mib(idle)

	e.progress.phase("memory: %d sleeping tasks", cfg.Tasks)
	c, err := taskorch.NewClient(e.admin, nil)
	if err != nil {
		return nil, err
	}
	params := make([]taskorch.EnqueueParams, cfg.Tasks)
	for i := range params {
		params[i] = taskorch.EnqueueParams{Args: builtinhandlers.SleepArgs{Millis: 10 * 60 * 1000}}
	}
	if _, err := c.EnqueueMany(ctx, params); err != nil {
		return nil, fmt.Errorf("bench: enqueue: %w", err)
	}
	if err := waitFor(fmt.Sprintf("run %d tasks at once", cfg.Tasks),
		`select count(*) = $2 from queues.task where status = 'running' and worker_id = $1`, id, cfg.Tasks); err != nil {
		return nil, err
	}
	end := time.Now().Add(cfg.Sample)
	var peak int64
	for time.Now().Before(end) {
		rss, hwm, err := procMemory(pid)
		if err != nil {
			return nil, err
		}
		r.RSSBytes = max(r.RSSBytes, rss)
		peak = hwm
		time.Sleep(100 * time.Millisecond)
	}
	r.RSSMB, r.PeakRSSMB = mib(r.RSSBytes), mib(peak)
	e.progress.phase("memory: stopping the worker")
	stop()
	e.progress.clear()
	r.finish()
	return r, nil
}

// procMemory reads VmRSS and VmHWM of process pid, in bytes.
func procMemory(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("bench: read the worker's memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(val) // "12345 kB"
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if name == "VmRSS" {
			rss = kb * 1024
		} else {
			hwm = kb * 1024
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("bench: no VmRSS in /proc/%d/status", pid)
	}
	return rss, hwm, nil
}

func mib(b int64) float64 { return round1(float64(b) / (1 << 20)) }

// withoutTaskorchEnv drops DATABASE_URL and the TASKORCH_* settings from env, so that the
// child worker runs with the benchmark's settings only.
func withoutTaskorchEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "TASKORCH_") || strings.HasPrefix(kv, "DATABASE_URL=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// limitedBuffer keeps the first 64 KiB written to it (a child's output, for an error message).
type limitedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 64<<10 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
