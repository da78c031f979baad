package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
)

// SleepersConfig configures Sleepers.
type SleepersConfig struct {
	// WorkerBinary is the taskorch binary to run as `taskorch worker` for the RSS. Required.
	WorkerBinary string
	// Sleepers is how many durable workflows are asleep in the second half. Defaults to 100,000.
	Sleepers int
	// Tasks is how many no-op tasks each half's in-process worker runs while its claims are
	// timed. Defaults to 20,000.
	Tasks int
	// Sample is how long an idle worker's RSS is sampled (every 100 ms). Defaults to 3s.
	Sample time.Duration
	// Rounds alternate the two sides (without, with; the sleepers deleted after each round).
	// Defaults to 3.
	Rounds int
}

// SleepersResult is Sleepers' result: each figure without the sleeping workflows, then with them.
type SleepersResult struct {
	Header
	Sleepers int `json:"sleepers"`
	Tasks    int `json:"tasks"`
	Rounds   int `json:"rounds"`
	// IdleRSSMB is the median over the rounds of the highest VmRSS of a fresh, idle `taskorch
	// worker` process over the sample.
	IdleRSSMBWithout float64 `json:"idle_rss_mb_without"`
	IdleRSSMBWith    float64 `json:"idle_rss_mb_with"`
	// Claim is the duration of the in-process worker's claim statements (as claimTracer times
	// them: concurrency 10, at most 10 tasks a claim) while it ran Tasks no-op tasks, every
	// round's; ClaimP99MS each round's p99.
	ClaimWithout      Percentiles `json:"claim_ms_without"`
	ClaimWith         Percentiles `json:"claim_ms_with"`
	ClaimP99MSWithout []float64   `json:"claim_p99_ms_without"`
	ClaimP99MSWith    []float64   `json:"claim_p99_ms_with"`
	ClaimsWithout     int         `json:"claims_without"`
	ClaimsWith        int         `json:"claims_with"`
	// RSSRatio and ClaimP99Ratio are with / without, of the medians over the rounds.
	RSSRatio      float64 `json:"rss_ratio"`
	ClaimP99Ratio float64 `json:"claim_p99_ratio"`
}

// Table implements Result.
func (r *SleepersResult) Table() []Row {
	return append(r.headerRows(),
		Row{"sleeping workflows", fmt.Sprintf("%d (pending, due in 30 days, one sleep checkpoint each)", r.Sleepers)},
		Row{"idle worker RSS", fmt.Sprintf("%.1f MiB without, %.1f MiB with (medians): ×%.3f", r.IdleRSSMBWithout, r.IdleRSSMBWith, r.RSSRatio)},
		Row{"claim statements", fmt.Sprintf("%d without, %d with, running %d no-op tasks each", r.ClaimsWithout, r.ClaimsWith, r.Tasks)},
		Row{"claim without", r.ClaimWithout.String()},
		Row{"claim with", r.ClaimWith.String()},
		Row{"claim p99 per round", fmt.Sprintf("without %v ms, with %v ms", r.ClaimP99MSWithout, r.ClaimP99MSWith)},
		Row{"claim p99 ratio", fmt.Sprintf("×%.3f (with / without, medians of %d rounds)", r.ClaimP99Ratio, r.Rounds)},
	)
}

// Sleepers measures what durable workflows asleep cost the workers: the idle RSS of a fresh
// `taskorch worker` process and the duration of an in-process worker's claims while it runs
// cfg.Tasks no-op tasks, on the empty database and with cfg.Sleepers workflows asleep, in
// alternating rounds —
// rows as a workflow's Sleep leaves them: pending, due in 30 days, with a sleep checkpoint in
// queues.workflow_step (docs/workflows.md, "Durable workflows in Go"). queues.task is vacuumed
// and analyzed once each side's no-op tasks are in, before its claims.
func Sleepers(ctx context.Context, e *Env, cfg SleepersConfig) (*SleepersResult, error) {
	if cfg.WorkerBinary == "" {
		return nil, errors.New("bench: the sleepers mode needs the taskorch binary to run as a worker")
	}
	if cfg.Sleepers <= 0 {
		cfg.Sleepers = 100_000
	}
	if cfg.Tasks <= 0 {
		cfg.Tasks = 20_000
	}
	if cfg.Sample <= 0 {
		cfg.Sample = 3 * time.Second
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		return nil, errors.New("bench: the sleepers mode reads /proc/PID/status (Linux)")
	}
	r := &SleepersResult{Header: e.header("sleepers"), Sleepers: cfg.Sleepers, Tasks: cfg.Tasks, Rounds: cfg.Rounds}
	var rssWithout, rssWith, p99Without, p99With []float64
	var claimsWithout, claimsWith []time.Duration
	for round := range cfg.Rounds {
		rss, err := idleWorkerRSS(ctx, e, cfg)
		if err != nil {
			return nil, err
		}
		rssWithout = append(rssWithout, rss)
		claims, err := timedClaims(ctx, e, cfg, fmt.Sprintf("round %d, without", round+1))
		if err != nil {
			return nil, err
		}
		claimsWithout = append(claimsWithout, claims...)
		p99Without = append(p99Without, percentiles(claims).P99)

		e.progress.phase("sleepers: %d workflows fall asleep", cfg.Sleepers)
		if err := fallAsleep(ctx, e, cfg.Sleepers); err != nil {
			return nil, err
		}
		if rss, err = idleWorkerRSS(ctx, e, cfg); err != nil {
			return nil, err
		}
		rssWith = append(rssWith, rss)
		if claims, err = timedClaims(ctx, e, cfg, fmt.Sprintf("round %d, with", round+1)); err != nil {
			return nil, err
		}
		claimsWith = append(claimsWith, claims...)
		p99With = append(p99With, percentiles(claims).P99)
		// The next round starts without them again.
		if _, err := e.admin.Exec(ctx, `delete from queues.task where task_type = 'bench.sleeper'`); err != nil {
			return nil, fmt.Errorf("bench: delete the sleeping workflows: %w", err)
		}
	}
	r.IdleRSSMBWithout, r.IdleRSSMBWith = medianOf(rssWithout), medianOf(rssWith)
	r.ClaimsWithout, r.ClaimWithout = len(claimsWithout), percentiles(claimsWithout)
	r.ClaimsWith, r.ClaimWith = len(claimsWith), percentiles(claimsWith)
	r.ClaimP99MSWithout, r.ClaimP99MSWith = p99Without, p99With
	if m := medianOf(rssWithout); m > 0 {
		r.RSSRatio = round3(medianOf(rssWith) / m)
	}
	if m := medianOf(p99Without); m > 0 {
		r.ClaimP99Ratio = round3(medianOf(p99With) / m)
	}
	e.progress.clear()
	r.finish()
	return r, nil
}

// fallAsleep adds n durable workflows asleep: pending, due in 30 days, with a sleep checkpoint.
// (A workflow's Sleep moves run_at and keeps scheduled_at; the claim reads run_at alone.)
func fallAsleep(ctx context.Context, e *Env, n int) error {
	if _, err := e.admin.Exec(ctx, `select count(queues.enqueue('bench.sleeper', jsonb_build_object('n', i),
		_scheduled_at => now() + interval '30 days')) from generate_series(1, $1::integer) i`, n); err != nil {
		return fmt.Errorf("bench: the sleeping workflows: %w", err)
	}
	var asleep int
	if err := e.admin.QueryRow(ctx, `with s as (
			insert into queues.workflow_step (task_id, seq, kind, name, wake_at, lease_id, attempt, started_at)
			select t.task_id, 1, 'sleep', 'a-month-later', t.run_at, 0, 1, now()
			from queues.task t
			where t.task_type = 'bench.sleeper' and t.status = 'pending' and t.run_at > now() + interval '29 days'
			returning 1)
		select count(*) from s`).Scan(&asleep); err != nil {
		return fmt.Errorf("bench: the sleeping workflows' checkpoints: %w", err)
	}
	if asleep != n {
		return fmt.Errorf("bench: %d sleeping workflows, want %d", asleep, n)
	}
	return nil
}

// idleWorkerRSS starts a `taskorch worker` process, waits until it registers and a second more,
// and returns its highest VmRSS over cfg.Sample, in MiB; then stops it.
func idleWorkerRSS(ctx context.Context, e *Env, cfg SleepersConfig) (float64, error) {
	id := "bench-sleepers-" + randomHex(3)
	var out limitedBuffer
	cmd := exec.Command(cfg.WorkerBinary, "worker") //nolint:gosec // the binary is the caller's choice
	cmd.Env = append(withoutTaskorchEnv(os.Environ()),
		"DATABASE_URL="+e.URL,
		"TASKORCH_MIGRATE=false",
		"TASKORCH_CONCURRENCY=10",
		"TASKORCH_WORKER_ID="+id,
		"TASKORCH_SHUTDOWN_GRACE=1ms",
		"TASKORCH_LOG_LEVEL=warn",
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	e.progress.phase("sleepers: an idle taskorch worker")
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("bench: start %s worker: %w", cfg.WorkerBinary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			e.log.Debug("worker exited", "error", err)
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			err := <-exited
			e.log.Warn("the worker did not stop within 15 s of SIGTERM; killed it", "error", err)
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
	time.Sleep(time.Second) // start-up settles; the idle poll backs off
	var most int64
	for end := time.Now().Add(cfg.Sample); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		rss, _, err := procMemory(cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		most = max(most, rss)
	}
	return mib(most), nil
}

// timedClaims runs cfg.Tasks no-op tasks through an in-process worker whose pool times its claim
// statements, and returns their durations.
func timedClaims(ctx context.Context, e *Env, cfg SleepersConfig, label string) ([]time.Duration, error) {
	e.progress.phase("sleepers: %d no-op tasks, claims timed (%s)", cfg.Tasks, label)
	tracer := &claimTracer{phase: -1, ds: make([][]time.Duration, 1)}
	// Ten tasks a claim: many claim statements to time, each a claim as the stock worker makes.
	o := WorkerOptions{Concurrency: 10, FetchBatch: 10}.withDefaults(10)
	pool, err := e.NewPool(ctx, int32(connsPerWorker+o.Concurrency), tracer) //nolint:gosec // small
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	hs := taskorch.NewHandlers()
	builtinhandlers.Register(hs)
	var mark int64
	if err := e.admin.QueryRow(ctx, `select coalesce(max(task_id), 0) from queues.task`).Scan(&mark); err != nil {
		return nil, err
	}
	if _, err := e.admin.Exec(ctx, `select queues.enqueue_many(array_fill('taskorch.noop'::text, array[$1::integer]), array_fill('{}'::jsonb, array[$1::integer]))`, cfg.Tasks); err != nil {
		return nil, fmt.Errorf("bench: enqueue: %w", err)
	}
	// Vacuumed and analyzed with the tasks in, as autovacuum leaves the table after a burst: the
	// dead rows of the tasks before are not the sleepers' cost, and the planner knows what is there.
	if _, err := e.admin.Exec(ctx, `vacuum analyze queues.task`); err != nil {
		return nil, fmt.Errorf("bench: vacuum: %w", err)
	}
	tracer.next(0)
	g, err := e.startWorkers(ctx, pool, o, taskorch.WorkerConfig{Handlers: hs})
	if err != nil {
		return nil, err
	}
	defer g.stop()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var open int
		if err := e.admin.QueryRow(ctx, `select count(*) from queues.task where task_id > $1 and status <> 'completed'`, mark).Scan(&open); err != nil {
			return nil, err
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: %d of %s no-op tasks not completed within 10 minutes", open, strconv.Itoa(cfg.Tasks))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return tracer.next(-1), nil
}
