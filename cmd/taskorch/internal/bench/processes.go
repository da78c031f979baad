package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/taskorch/taskorch/internal/humanize"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/providers"
)

// ProcessesConfig configures Processes. The environment must be opened with the comms process
// set (Options.Processes).
type ProcessesConfig struct {
	WorkerOptions // Concurrency defaults to 32: db_function tasks hold a connection each.

	// Count is how many email sends are started. Defaults to 10,000.
	Count int
	// CheckInterval is comms.process_config's check_interval for the run: how soon a tick looks
	// again at a send whose attempt is outstanding (a success ends the send in its handler, a
	// failure wakes the supervisor at once). Defaults to 1s. The backoff is set to 100 ms
	// (nothing fails here).
	CheckInterval time.Duration
}

func (c ProcessesConfig) withDefaults() ProcessesConfig {
	c.WorkerOptions = c.WorkerOptions.withDefaults(32)
	if c.Count <= 0 {
		c.Count = 10_000
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = time.Second
	}
	return c
}

// ProcessesResult is Processes' result.
type ProcessesResult struct {
	Header
	Processes      int     `json:"processes"`
	Workers        int     `json:"workers"`
	Concurrency    int     `json:"concurrency"`
	CheckInterval  string  `json:"check_interval"`
	KickoffSeconds float64 `json:"kickoff_seconds"`
	// Seconds is from the workers' start until every process has a terminal fact
	// (send_email_task_succeeded or _failed).
	Seconds             float64 `json:"seconds"`
	ProcessesPerSecond  float64 `json:"processes_per_second"`
	Succeeded           int64   `json:"succeeded"`
	Failed              int64   `json:"failed"`
	OutboxMessages      int64   `json:"outbox_messages"`
	SupervisorRuns      int64   `json:"supervisor_runs"`
	EmailTasks          int64   `json:"email_tasks"`
	TasksPerSecond      float64 `json:"tasks_per_second"`
	EmailProviderSource string  `json:"email_provider"`
	// CPU is the CPU time per process, from the workers' start to the last terminal fact.
	CPU CPUCost `json:"cpu_per_process"`
}

// Table implements Result.
func (r *ProcessesResult) Table() []Row {
	return append(r.headerRows(),
		Row{"processes", fmt.Sprintf("%s comms.send_email, started in %.2f s (check_interval %s)", humanize.Thousands(int64(r.Processes)), r.KickoffSeconds, r.CheckInterval)},
		Row{"workers", fmt.Sprintf("%d in-process, concurrency %d each, email provider %s", r.Workers, r.Concurrency, r.EmailProviderSource)},
		Row{"to terminal facts", fmt.Sprintf("%.3f s: %s succeeded, %s failed", r.Seconds, humanize.Thousands(r.Succeeded), humanize.Thousands(r.Failed))},
		Row{"throughput", humanize.Thousands(int64(r.ProcessesPerSecond)) + " processes/s"},
		Row{"tasks run", fmt.Sprintf("%s supervisor runs, %s email tasks, %s outbox messages (%s tasks/s)",
			humanize.Thousands(r.SupervisorRuns), humanize.Thousands(r.EmailTasks), humanize.Thousands(r.OutboxMessages), humanize.Thousands(int64(r.TasksPerSecond)))},
		Row{"CPU per process", r.CPU.String()},
	)
}

// Processes starts cfg.Count supervised email sends with comms.send_email, then runs workers
// with the outbox email provider until every send has a terminal fact.
func Processes(ctx context.Context, e *Env, cfg ProcessesConfig) (*ProcessesResult, error) {
	cfg = cfg.withDefaults()
	r := &ProcessesResult{Header: e.header("processes"), Processes: cfg.Count, Workers: cfg.Workers,
		Concurrency: cfg.Concurrency, CheckInterval: cfg.CheckInterval.String(), EmailProviderSource: "outbox (providers.Outbox)"}
	var installed bool
	if err := e.admin.QueryRow(ctx, `select to_regproc('comms.send_email') is not null`).Scan(&installed); err != nil {
		return nil, err
	}
	if !installed {
		return nil, fmt.Errorf("bench: the comms process set is not installed (open the environment with Processes: comms)")
	}
	if _, err := e.admin.Exec(ctx, `update comms.process_config set backoff_base = '100 ms', backoff_max = '1 s',
		check_interval = $1::interval where process = 'send_email'`, cfg.CheckInterval.String()); err != nil {
		return nil, err
	}
	e.checkpoint(ctx)
	mark, err := e.taskMark(ctx)
	if err != nil {
		return nil, err
	}
	var first int64
	if err := e.admin.QueryRow(ctx, `select coalesce(max(send_email_task_id), 0) from comms.send_email_task`).Scan(&first); err != nil {
		return nil, err
	}
	var outbox0 int64
	if err := e.admin.QueryRow(ctx, `select coalesce(max(outbox_message_id), 0) from queues.outbox_message`).Scan(&outbox0); err != nil {
		return nil, err
	}

	// Kick off: one send_email call per process, a thousand per transaction.
	t0 := time.Now()
	const batch = 1000
	for done := 0; done < cfg.Count; done += batch {
		e.progress.phase("processes: starting %s of %s", humanize.Thousands(int64(done)), humanize.Thousands(int64(cfg.Count)))
		if _, err := e.admin.Exec(ctx, `select count(comms.send_email('bench-' || i || '@example.com', 'Benchmark ' || i,
			'Hello from taskorch bench', null)) from generate_series($1::int, $2::int) i`, done+1, min(done+batch, cfg.Count)); err != nil {
			return nil, fmt.Errorf("bench: comms.send_email: %w", err)
		}
	}
	r.KickoffSeconds = seconds(time.Since(t0))
	if _, err := e.admin.Exec(ctx, `analyze queues.task`); err != nil {
		return nil, err
	}

	pool, err := e.workerPool(ctx, cfg.WorkerOptions, 1)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	outbox, err := providers.NewOutbox(pool, taskorch.TypeEmail)
	if err != nil {
		return nil, err
	}
	cpu0 := e.cpuNow()
	start := time.Now()
	g, err := e.startWorkers(ctx, pool, cfg.WorkerOptions, taskorch.WorkerConfig{
		Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: outbox},
	})
	if err != nil {
		return nil, err
	}
	defer g.stop()

	const terminal = `select (select count(*) from comms.send_email_task_succeeded where send_email_task_id > $1),
		(select count(*) from comms.send_email_task_failed where send_email_task_id > $1)`
	lastMoved, last := time.Now(), int64(-1)
	for {
		if err := e.admin.QueryRow(ctx, terminal, first).Scan(&r.Succeeded, &r.Failed); err != nil {
			return nil, err
		}
		n := r.Succeeded + r.Failed
		if n >= int64(cfg.Count) {
			break
		}
		now := time.Now()
		if n != last {
			last, lastMoved = n, now
		} else if now.Sub(lastMoved) > time.Minute {
			return nil, fmt.Errorf("bench: stalled at %d of %d processes for a minute (see the workers' log)", n, cfg.Count)
		}
		e.progress.phase("processes: %s of %s done (%s/s)", humanize.Thousands(n), humanize.Thousands(int64(cfg.Count)), humanize.Thousands(int64(rate(n, now.Sub(start)))))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollInterval(n, int64(cfg.Count), now.Sub(start))):
		}
	}
	took := time.Since(start)
	r.CPU = cpuCost(cpu0, e.cpuNow(), int64(cfg.Count), runtime.NumCPU())
	g.stop()
	r.Seconds, r.ProcessesPerSecond = seconds(took), rate(int64(cfg.Count), took)
	if err := e.admin.QueryRow(ctx, `select
		count(*) filter (where task_type = 'db_function' and status = 'completed'),
		count(*) filter (where task_type = 'email' and status = 'completed')
		from queues.task where task_id > $1`, mark).Scan(&r.SupervisorRuns, &r.EmailTasks); err != nil {
		return nil, err
	}
	if err := e.admin.QueryRow(ctx, `select count(*) from queues.outbox_message where outbox_message_id > $1`, outbox0).Scan(&r.OutboxMessages); err != nil {
		return nil, err
	}
	r.TasksPerSecond = rate(r.SupervisorRuns+r.EmailTasks, took)
	e.progress.clear()
	r.finish()
	return r, nil
}

// pollInterval is how long the processes mode waits before it counts the terminal facts again:
// a quarter of the time the rest should take at the rate so far, between 20 ms and 500 ms. The
// count reads every terminal fact of the run, so polling every 20 ms throughout would cost the
// server a few percent of what it measures; near the end it polls every 20 ms, so the end is
// seen within 20 ms.
func pollInterval(done, total int64, elapsed time.Duration) time.Duration {
	const lo, hi = 20 * time.Millisecond, 500 * time.Millisecond
	if done <= 0 || elapsed <= 0 {
		return lo
	}
	rest := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
	return min(max(rest/4, lo), hi)
}
