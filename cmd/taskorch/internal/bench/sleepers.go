package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/humanize"
)

// SleepersConfig configures Sleepers.
type SleepersConfig struct {
	WorkerOptions // Concurrency defaults to 100.

	// Sleepers is how many durable workflows are put to sleep (for 30 days) between the two
	// phases. Defaults to 100,000.
	Sleepers int
	// Rate is the no-op tasks enqueued a second in each phase. Defaults to 1,000.
	Rate int
	// Phase is how long each phase enqueues. Defaults to 20 s.
	Phase time.Duration
	// Idle is how long the worker idles after each phase's load. Defaults to 5 s.
	Idle time.Duration
	// WorkerBinary is a taskorch binary to run as a separate `taskorch worker` process in each
	// phase's idle time, whose resident memory is the phase's idle worker RSS. Without it, only
	// this process's own figures are taken.
	WorkerBinary string
}

// SleepersPhase is one phase of Sleepers: a steady load of no-op tasks, the claims' durations
// while it ran, and the worker process's memory once idle after it.
type SleepersPhase struct {
	Name     string      `json:"name"`
	Sleeping int64       `json:"sleeping"` // durable workflows asleep during the phase
	Tasks    int64       `json:"tasks"`
	Claims   int         `json:"claims"`
	Claim    Percentiles `json:"claim_ms"`
	// WorkerRSSMB is the highest VmRSS of a separate, fresh `taskorch worker` process, idle
	// after the phase (0 without SleepersConfig.WorkerBinary).
	WorkerRSSMB float64 `json:"worker_rss_mb"`
	// IdleRSSMB is this process's VmRSS (its in-process worker's and the benchmark's own), idle
	// after the phase, after a garbage collection that returned freed memory to the system;
	// HeapMB the Go heap in use then.
	IdleRSSMB float64 `json:"idle_rss_mb"`
	HeapMB    float64 `json:"heap_mb"`
	// IdleClaim is the claim durations while the worker waited, idle, after the phase (it
	// claims on each poll; nothing is due).
	IdleClaims int         `json:"idle_claims"`
	IdleClaim  Percentiles `json:"idle_claim_ms"`
}

// SleepersResult is Sleepers' result.
type SleepersResult struct {
	Header
	Sleepers     int     `json:"sleepers"`
	Rate         int     `json:"rate"`
	PhaseSeconds float64 `json:"phase_seconds"`
	Concurrency  int     `json:"concurrency"`
	// PutToSleepSeconds is how long the Sleepers workflows took from enqueue to all asleep.
	PutToSleepSeconds float64         `json:"put_to_sleep_seconds"`
	Phases            []SleepersPhase `json:"phases"`
	// RSSRatio and ClaimP99Ratio divide the second phase's (with the sleepers) by the first's:
	// the separate worker process's RSS (this process's without WorkerBinary) and the claims'
	// p99 under the load.
	RSSRatio      float64 `json:"rss_ratio"`
	ClaimP99Ratio float64 `json:"claim_p99_ratio"`
}

// Table implements Result.
func (r *SleepersResult) Table() []Row {
	rows := append(r.headerRows(),
		Row{"load", fmt.Sprintf("%s no-op tasks/s for %.0f s a phase; 1 in-process worker, concurrency %d", humanize.Thousands(int64(r.Rate)), r.PhaseSeconds, r.Concurrency)},
		Row{"sleepers", fmt.Sprintf("%s durable workflows put to sleep for 30 days between the phases, in %.1f s", humanize.Thousands(int64(r.Sleepers)), r.PutToSleepSeconds)},
	)
	for _, p := range r.Phases {
		rows = append(rows,
			Row{p.Name, fmt.Sprintf("%s asleep; %s tasks; %d claims: %s", humanize.Thousands(p.Sleeping), humanize.Thousands(p.Tasks), p.Claims, p.Claim)},
			Row{p.Name + ", idle", fmt.Sprintf("a fresh taskorch worker process: RSS %.1f MiB; this process: RSS %.1f MiB (Go heap %.1f MiB); %d idle claims: %s",
				p.WorkerRSSMB, p.IdleRSSMB, p.HeapMB, p.IdleClaims, p.IdleClaim)},
		)
	}
	rows = append(rows, Row{"with ÷ without", fmt.Sprintf("idle worker RSS %.3f, claim p99 %.2f", r.RSSRatio, r.ClaimP99Ratio)})
	return rows
}

const sleeperType = "bench.sleeper"

type sleeperArgs struct{}

func (sleeperArgs) TaskType() string { return sleeperType }

// sleeperSleep is how long the sleepers sleep: past any run of the benchmark.
const sleeperSleep = 30 * 24 * time.Hour

// Sleepers measures what durable workflows asleep cost the workers (docs/workflows.md, "Durable
// workflows in Go"): one in-process worker runs a steady load of no-op tasks (Rate a second for
// Phase), then idles for Idle; then Sleepers durable workflows each take a Step and go to sleep for 30
// days; then the same load and idle again. Per phase: the claim statements' durations under the
// load and while idle (a pgx tracer on the worker's pool), and the process's resident memory
// once idle, after a garbage collection that returns freed memory to the system.
func Sleepers(ctx context.Context, e *Env, cfg SleepersConfig) (*SleepersResult, error) {
	if cfg.Sleepers <= 0 {
		cfg.Sleepers = 100_000
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 1000
	}
	if cfg.Phase <= 0 {
		cfg.Phase = 20 * time.Second
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 5 * time.Second
	}
	cfg.WorkerOptions = cfg.withDefaults(100)
	cfg.Workers = 1
	r := &SleepersResult{Header: e.header("sleepers"), Sleepers: cfg.Sleepers, Rate: cfg.Rate,
		PhaseSeconds: cfg.Phase.Seconds(), Concurrency: cfg.Concurrency}

	// Phases 0 and 2 are the loads, 1 and 3 the idle waits after them.
	tracer := &claimTracer{phase: -1, ds: make([][]time.Duration, 4)}
	enqPool, err := e.NewPool(ctx, 2, nil)
	if err != nil {
		return nil, err
	}
	defer enqPool.Close()
	client, err := taskorch.NewClient(enqPool, nil)
	if err != nil {
		return nil, err
	}
	done := newCounter(-1)
	handlers := func() *taskorch.Handlers {
		hs := noopHandlers(done)
		taskorch.AddWorkflow(hs, func(_ context.Context, wf *taskorch.Workflow, _ sleeperArgs) error {
			if _, err := taskorch.Step(wf, "before", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return err
			}
			return wf.Sleep("nap", sleeperSleep)
		})
		return hs
	}
	// start starts a worker of its own, on a pool of its own: each phase's idle memory is that
	// of a worker started for it, not of the connections an earlier one opened.
	start := func() (stop func(), err error) {
		pool, err := e.NewPool(ctx, int32(connsPerWorker+cfg.Concurrency), tracer) //nolint:gosec // bounded by the flag's check
		if err != nil {
			return nil, err
		}
		g, err := e.startWorkers(ctx, pool, cfg.WorkerOptions, taskorch.WorkerConfig{Handlers: handlers()})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return func() { g.stop(); pool.Close() }, nil
	}

	phase := func(name string, i int) (SleepersPhase, error) {
		p := SleepersPhase{Name: name}
		stopWorker, err := start()
		if err != nil {
			return p, err
		}
		defer stopWorker()
		if err := e.admin.QueryRow(ctx, `select count(*) from queues.task where task_type = $1 and status = 'pending'`, sleeperType).Scan(&p.Sleeping); err != nil {
			return p, err
		}
		tracer.next(i)
		before := done.n.Load()
		pctx, stop := context.WithTimeout(ctx, cfg.Phase)
		prod := &producer{client: client, rate: cfg.Rate, err: make(chan error, 1)}
		e.progress.phase("%s: %s tasks/s for %s", name, humanize.Thousands(int64(cfg.Rate)), cfg.Phase)
		prod.run(pctx)
		stop()
		select {
		case err := <-prod.err:
			return p, fmt.Errorf("bench: enqueue: %w", err)
		default:
		}
		if ctx.Err() != nil {
			return p, ctx.Err()
		}
		p.Tasks = prod.enqueued.Load()
		for done.n.Load()-before < p.Tasks { // drain what was enqueued
			select {
			case <-ctx.Done():
				return p, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		ds := tracer.next(i + 1)
		p.Claims, p.Claim = len(ds), percentiles(ds)
		e.progress.phase("%s: idle", name)
		idleEnd := time.Now().Add(cfg.Idle)
		if cfg.WorkerBinary != "" {
			if p.WorkerRSSMB, err = idleWorkerRSS(ctx, e, cfg.WorkerBinary); err != nil {
				return p, err
			}
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(time.Until(idleEnd)):
		}
		ids := tracer.next(-1)
		p.IdleClaims, p.IdleClaim = len(ids), percentiles(ids)
		runtime.GC()
		debug.FreeOSMemory()
		rss, _, err := procMemory(os.Getpid())
		if err != nil {
			return p, err
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		p.IdleRSSMB, p.HeapMB = round1(float64(rss)/(1<<20)), round1(float64(ms.HeapInuse)/(1<<20))
		return p, nil
	}

	if _, err := e.admin.Exec(ctx, `vacuum analyze queues.task`); err != nil {
		return nil, err
	}
	without, err := phase("without sleepers", 0)
	if err != nil {
		return nil, err
	}

	e.progress.phase("putting %s workflows to sleep", humanize.Thousands(int64(cfg.Sleepers)))
	stopSleepWorker, err := start()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	const batch = 5000
	for n := 0; n < cfg.Sleepers; n += batch {
		if _, err := e.admin.Exec(ctx, `select queues.enqueue_many(array_fill($1::text, array[$2::int]), array_fill('{}'::jsonb, array[$2::int]))`,
			sleeperType, min(batch, cfg.Sleepers-n)); err != nil {
			return nil, fmt.Errorf("bench: enqueue the sleepers: %w", err)
		}
	}
	for {
		var asleep int64
		if err := e.admin.QueryRow(ctx, `select count(*) from queues.task where task_type = $1 and status = 'pending' and run_at > now() + interval '1 day'`,
			sleeperType).Scan(&asleep); err != nil {
			return nil, err
		}
		if asleep == int64(cfg.Sleepers) {
			break
		}
		e.progress.phase("putting workflows to sleep: %s of %s asleep", humanize.Thousands(asleep), humanize.Thousands(int64(cfg.Sleepers)))
		if time.Since(t0) > 30*time.Minute {
			return nil, errors.New("bench: the sleepers were not all asleep within 30 minutes")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	r.PutToSleepSeconds = seconds(time.Since(t0))
	stopSleepWorker()
	if _, err := e.admin.Exec(ctx, `vacuum analyze queues.task`); err != nil {
		return nil, err
	}

	with, err := phase("with sleepers", 2)
	if err != nil {
		return nil, err
	}
	r.Phases = []SleepersPhase{without, with}
	switch {
	case without.WorkerRSSMB > 0:
		r.RSSRatio = round3(with.WorkerRSSMB / without.WorkerRSSMB)
	case without.IdleRSSMB > 0:
		r.RSSRatio = round3(with.IdleRSSMB / without.IdleRSSMB)
	}
	if without.Claim.P99 > 0 {
		r.ClaimP99Ratio = round3(with.Claim.P99 / without.Claim.P99)
	}
	e.progress.clear()
	r.finish()
	return r, nil
}

// idleWorkerRSS starts a `taskorch worker` process of binary on the benchmark's database, waits
// until it has registered and a second more (its start-up settles, its idle poll backs off),
// and returns its highest VmRSS over the next 2 s, in MiB; then stops it.
func idleWorkerRSS(ctx context.Context, e *Env, binary string) (float64, error) {
	id := "bench-sleepers-" + randomHex(3)
	var out limitedBuffer
	cmd := exec.Command(binary, "worker") //nolint:gosec // the binary is the caller's choice
	cmd.Env = append(withoutTaskorchEnv(os.Environ()),
		"DATABASE_URL="+e.URL,
		"TASKORCH_MIGRATE=false",
		"TASKORCH_CONCURRENCY=10",
		"TASKORCH_WORKER_ID="+id,
		"TASKORCH_SHUTDOWN_GRACE=1ms",
		"TASKORCH_LOG_LEVEL=warn",
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("bench: start %s worker: %w", binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			e.log.Debug("the idle worker exited", "error", err)
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			e.log.Warn("the idle worker did not stop within 15 s of SIGTERM; killed it", "error", <-exited)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		if err := e.admin.QueryRow(ctx, `select exists (select 1 from queues.worker where worker_id = $1)`, id).Scan(&ok); err != nil {
			return 0, err
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("bench: the worker did not register within 30 s; its output:\n%s", out.String())
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case err := <-exited:
			exited <- err
			return 0, fmt.Errorf("bench: the worker exited (%v); its output:\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(time.Second):
	}
	var most int64
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		rss, _, err := procMemory(cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		most = max(most, rss)
	}
	return mib(most), nil
}
