package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
	"github.com/taskorch/taskorch/internal/humanize"
)

// SlotsConfig configures Slots.
type SlotsConfig struct {
	WorkerOptions // Concurrency (W) defaults to 16.

	// Work is how long each handler works: it sleeps (time.Sleep), as the peer benchmark's
	// handlers do. Defaults to 1ms.
	Work time.Duration
	// Tasks is the backlog enqueued before the workers start. Defaults to about two seconds of
	// ideal work (Workers × Concurrency × 2s ÷ Work), between 1,000 and 200,000.
	Tasks int
}

func (c SlotsConfig) withDefaults() (SlotsConfig, error) {
	c.WorkerOptions = c.WorkerOptions.withDefaults(16)
	if c.Work == 0 {
		c.Work = time.Millisecond
	}
	if c.Work < 0 || c.Work > time.Minute {
		return c, fmt.Errorf("bench: --work must be between 0 and 1m, got %s", c.Work)
	}
	if c.Tasks < 0 {
		return c, fmt.Errorf("bench: --tasks must not be negative, got %d", c.Tasks)
	}
	if c.Tasks == 0 {
		ideal := int(int64(c.Workers*c.Concurrency) * int64(2*time.Second) / int64(c.Work))
		c.Tasks = min(max(ideal, 1000), 200_000)
	}
	return c, nil
}

// SlotsResult is Slots' result.
type SlotsResult struct {
	Header
	Tasks       int64 `json:"tasks"`
	Workers     int   `json:"workers"`
	Concurrency int   `json:"concurrency"`
	// FetchBatch is --fetch-batch; 0 leaves the worker's default (WorkerConfig.FetchBatch).
	FetchBatch int     `json:"fetch_batch"`
	WorkMS     float64 `json:"work_ms"`
	// Handler says how a handler works: "sleep" (time.Sleep for WorkMS).
	Handler string `json:"handler"`
	// Seconds is from the workers' start to the last completion committed.
	Seconds        float64 `json:"seconds"`
	TasksPerSecond float64 `json:"tasks_per_second"`
	// Utilisation is Tasks × Work ÷ (Seconds × slots): the share of slot time spent on the
	// nominal work. HandlerUtilisation counts the time handlers actually took instead (a sleep
	// of 1 ms takes a little longer).
	Utilisation        float64 `json:"utilisation"`
	HandlerUtilisation float64 `json:"handler_utilisation"`
	// IdleMSPerTask is the slot time not spent in a handler, per task: what a slot waits
	// between two tasks on average (claims, completions, start-up and the tail).
	IdleMSPerTask float64 `json:"idle_ms_per_task"`
	// The steady state: the same figures between the handlers' 10th and 90th percentile of
	// tasks (by the order they finished), without the workers' start-up (registration, the first
	// claim) and the tail (the last tasks, when fewer than W are left).
	SteadyTasksPerSecond float64 `json:"steady_tasks_per_second"`
	SteadyUtilisation    float64 `json:"steady_utilisation"`
	SteadyIdleMSPerTask  float64 `json:"steady_idle_ms_per_task"`
	CPU                  CPUCost `json:"cpu_per_task"`
}

// Table implements Result.
func (r *SlotsResult) Table() []Row {
	return append(r.headerRows(),
		Row{"tasks", fmt.Sprintf("%s backlog, enqueued before the start; handlers sleep %s ms", humanize.Thousands(r.Tasks), fmtMS(r.WorkMS))},
		Row{"workers", fmt.Sprintf("%d in-process, %d slots each, fetch batch %s", r.Workers, r.Concurrency, fetchBatchText(r.FetchBatch))},
		Row{"worked in", fmt.Sprintf("%.3f s", r.Seconds)},
		Row{"throughput", humanize.Thousands(int64(r.TasksPerSecond)) + " tasks/s"},
		Row{"utilisation", fmt.Sprintf("%.1f%% of slot time on the nominal work (%.1f%% in handlers)", 100*r.Utilisation, 100*r.HandlerUtilisation)},
		Row{"idle per task", fmtMS(r.IdleMSPerTask) + " ms a slot waits between tasks"},
		Row{"steady state", fmt.Sprintf("%s tasks/s, %.1f%% of slot time on the nominal work, %s ms idle per task (the 10th to the 90th percentile of tasks)",
			humanize.Thousands(int64(r.SteadyTasksPerSecond)), 100*r.SteadyUtilisation, fmtMS(r.SteadyIdleMSPerTask))},
		Row{"CPU per task", r.CPU.String()},
	)
}

// Slots measures how busy a worker keeps its slots over a backlog: W slots, handlers that
// work a fixed time, tasks enqueued before the start; tasks per second and slot utilisation.
func Slots(ctx context.Context, e *Env, cfg SlotsConfig) (*SlotsResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &SlotsResult{Header: e.header("slots"), Tasks: int64(cfg.Tasks), Workers: cfg.Workers, Concurrency: cfg.Concurrency,
		FetchBatch: cfg.FetchBatch, WorkMS: ms(cfg.Work), Handler: "sleep"}
	e.checkpoint(ctx)
	mark, err := e.taskMark(ctx)
	if err != nil {
		return nil, err
	}
	e.progress.phase("enqueueing %s tasks", humanize.Thousands(r.Tasks))
	if err := e.enqueueNoops(ctx, cfg.Tasks, "copy", 0); err != nil {
		return nil, fmt.Errorf("bench: enqueue: %w", err)
	}
	if _, err := e.admin.Exec(ctx, `vacuum analyze queues.task`); err != nil {
		return nil, err
	}

	pool, err := e.workerPool(ctx, cfg.WorkerOptions, 0)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	count := newCounter(r.Tasks)
	var busy atomic.Int64 // nanoseconds spent in handlers
	// The steady window: from the handler that finishes the lo-th task to the one that finishes
	// the hi-th, with the handler time spent by then.
	lo, hi := r.Tasks/10, r.Tasks*9/10
	var finished atomic.Int64
	var steady [2]struct {
		at   time.Time
		busy int64
	}
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[builtinhandlers.NoopArgs]) error {
		t0 := time.Now()
		time.Sleep(cfg.Work)
		b := busy.Add(int64(time.Since(t0)))
		switch finished.Add(1) {
		case lo:
			steady[0].at, steady[0].busy = time.Now(), b
		case hi:
			steady[1].at, steady[1].busy = time.Now(), b
		}
		count.add()
		return nil
	})
	cpu0 := e.cpuNow()
	start := time.Now()
	g, err := e.startWorkers(ctx, pool, cfg.WorkerOptions, taskorch.WorkerConfig{Handlers: hs})
	if err != nil {
		return nil, err
	}
	defer g.stop()
	if err := e.waitCount(ctx, count, start, "working"); err != nil {
		return nil, err
	}
	if err := e.waitNoneRunning(ctx); err != nil {
		return nil, err
	}
	took := time.Since(start)
	r.CPU = cpuCost(cpu0, e.cpuNow(), r.Tasks, runtime.NumCPU())
	g.stop()

	slotTime := took.Seconds() * float64(cfg.Workers*cfg.Concurrency)
	r.Seconds, r.TasksPerSecond = seconds(took), rate(r.Tasks, took)
	r.Utilisation = round3(float64(r.Tasks) * cfg.Work.Seconds() / slotTime)
	r.HandlerUtilisation = round3(time.Duration(busy.Load()).Seconds() / slotTime)
	r.IdleMSPerTask = round3((slotTime - time.Duration(busy.Load()).Seconds()) * 1000 / float64(r.Tasks))
	if window := steady[1].at.Sub(steady[0].at); hi > lo && window > 0 {
		// Both were written before count reached its target, which waitCount saw.
		n, slotTime := hi-lo, window.Seconds()*float64(cfg.Workers*cfg.Concurrency)
		r.SteadyTasksPerSecond = rate(n, window)
		r.SteadyUtilisation = round3(float64(n) * cfg.Work.Seconds() / slotTime)
		r.SteadyIdleMSPerTask = round3((slotTime - time.Duration(steady[1].busy-steady[0].busy).Seconds()) * 1000 / float64(n))
	}

	var completed int64
	if err := e.admin.QueryRow(ctx, `select count(*) from queues.task where task_id > $1 and status = 'completed'`, mark).Scan(&completed); err != nil {
		return nil, err
	}
	if completed != r.Tasks {
		return nil, fmt.Errorf("bench: %d of %d tasks completed", completed, r.Tasks)
	}
	e.progress.clear()
	r.finish()
	return r, nil
}
