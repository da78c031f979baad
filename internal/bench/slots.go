package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
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
	batch := c.FetchBatch
	c.WorkerOptions = c.WorkerOptions.withDefaults(16)
	c.FetchBatch = batch // 0: the worker's own default, which this mode measures
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
	CPU           CPUCost `json:"cpu_per_task"`
}

// Table implements Result.
func (r *SlotsResult) Table() []Row {
	batch := "the worker's default"
	if r.FetchBatch > 0 {
		batch = strconv.Itoa(r.FetchBatch)
	}
	return append(r.headerRows(),
		Row{"tasks", fmt.Sprintf("%s backlog, enqueued before the start; handlers sleep %s ms", humanize.Thousands(r.Tasks), fmtMS(r.WorkMS))},
		Row{"workers", fmt.Sprintf("%d in-process, %d slots each, fetch batch %s", r.Workers, r.Concurrency, batch)},
		Row{"worked in", fmt.Sprintf("%.3f s", r.Seconds)},
		Row{"throughput", humanize.Thousands(int64(r.TasksPerSecond)) + " tasks/s"},
		Row{"utilisation", fmt.Sprintf("%.1f%% of slot time on the nominal work (%.1f%% in handlers)", 100*r.Utilisation, 100*r.HandlerUtilisation)},
		Row{"idle per task", fmtMS(r.IdleMSPerTask) + " ms a slot waits between tasks"},
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
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[builtinhandlers.NoopArgs]) error {
		t0 := time.Now()
		time.Sleep(cfg.Work)
		busy.Add(int64(time.Since(t0)))
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
