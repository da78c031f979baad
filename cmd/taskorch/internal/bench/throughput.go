package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/taskorch/taskorch/internal/humanize"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
)

// ThroughputConfig configures Throughput.
type ThroughputConfig struct {
	WorkerOptions // Concurrency defaults to 200.

	// Tasks is how many no-op tasks are enqueued, then worked. Defaults to 100,000.
	Tasks int
	// Enqueue is how they are enqueued: "many" (Client.EnqueueMany, 5,000 tasks a statement) or
	// "copy" (COPY into queues.task). Defaults to "many".
	Enqueue string

	// LimitKeys, when above 0 (bulk only), puts the no-op type under a limit of one running
	// task per key (queues.set_limit, key field "k") and spreads the tasks over this many keys:
	// the cost of the limited claim path. Keys outnumbering the workers' slots, the limit itself
	// never holds a task back.
	LimitKeys int

	// Steady enqueues while the workers work, keeping a small backlog, and measures for
	// Duration after Warmup instead of working a bulk-enqueued set.
	Steady   bool
	Duration time.Duration // defaults to 10s
	Warmup   time.Duration // defaults to 1s

	// handlers, when set, makes the workers' handlers of the no-op type in place of
	// noopHandlers; each task handled calls c.add (bench push: push.go).
	handlers func(c *counter) (*taskorch.Handlers, error)
}

func (c ThroughputConfig) withDefaults() (ThroughputConfig, error) {
	c.WorkerOptions = c.WorkerOptions.withDefaults(200)
	if c.Tasks <= 0 {
		c.Tasks = 100_000
	}
	if c.Enqueue == "" {
		c.Enqueue = "many"
	}
	if c.Enqueue != "many" && c.Enqueue != "copy" {
		return c, fmt.Errorf("bench: enqueue method %q: want many or copy", c.Enqueue)
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.LimitKeys < 0 || (c.LimitKeys > 0 && c.Steady) {
		return c, fmt.Errorf("bench: --limit-keys must be positive, and is for the bulk mode only")
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	} else if c.Warmup == 0 {
		c.Warmup = time.Second
	}
	return c, nil
}

// ThroughputRun is one throughput measurement.
type ThroughputRun struct {
	Tasks       int64  `json:"tasks"`
	Workers     int    `json:"workers"`
	Concurrency int    `json:"concurrency"`
	FetchBatch  int    `json:"fetch_batch"`
	Metrics     bool   `json:"metrics"`
	Steady      bool   `json:"steady"`
	Enqueue     string `json:"enqueue"`
	LimitKeys   int    `json:"limit_keys,omitempty"`
	// EnqueueSeconds is the bulk enqueue's wall time (before the workers start); in steady mode,
	// EnqueueTasksPerSecond is the rate the enqueuer kept up during the window.
	EnqueueSeconds        float64 `json:"enqueue_seconds,omitempty"`
	EnqueueTasksPerSecond float64 `json:"enqueue_tasks_per_second"`
	// Seconds is the measured window: from the workers' start to the last completion committed
	// (bulk), or the steady window.
	Seconds        float64 `json:"seconds"`
	TasksPerSecond float64 `json:"tasks_per_second"`
	// CPU is the CPU time per task in the measured window.
	CPU CPUCost `json:"cpu_per_task"`
}

// ThroughputResult is Throughput's result.
type ThroughputResult struct {
	Header
	ThroughputRun
}

// Table implements Result.
func (r *ThroughputResult) Table() []Row { return append(r.headerRows(), r.runRows()...) }

func (r *ThroughputRun) runRows() []Row {
	how := "bulk-enqueued, then worked"
	if r.Steady {
		how = "steady: enqueued while worked"
	}
	if r.LimitKeys > 0 {
		how += fmt.Sprintf(", limited to 1 running per key over %s keys", humanize.Thousands(int64(r.LimitKeys)))
	}
	rows := []Row{
		{"tasks", fmt.Sprintf("%s no-op (%s)", humanize.Thousands(r.Tasks), how)},
		{"workers", fmt.Sprintf("%d in-process, concurrency %d each, fetch batch %s, metrics %v", r.Workers, r.Concurrency, fetchBatchText(r.FetchBatch), r.Metrics)},
	}
	if r.Steady {
		rows = append(rows, Row{"enqueued", fmt.Sprintf("%s tasks/s (%s)", humanize.Thousands(int64(r.EnqueueTasksPerSecond)), r.Enqueue)})
	} else {
		rows = append(rows, Row{"enqueue", fmt.Sprintf("%.3f s, %s tasks/s (%s)", r.EnqueueSeconds, humanize.Thousands(int64(r.EnqueueTasksPerSecond)), r.Enqueue)})
	}
	return append(rows,
		Row{"worked in", fmt.Sprintf("%.3f s", r.Seconds)},
		Row{"throughput", humanize.Thousands(int64(r.TasksPerSecond)) + " tasks/s"},
		Row{"CPU per task", r.CPU.String()},
	)
}

// Throughput measures how fast the workers work no-op tasks.
func Throughput(ctx context.Context, e *Env, cfg ThroughputConfig) (*ThroughputResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &ThroughputResult{Header: e.header("throughput")}
	if cfg.Steady {
		r.ThroughputRun, err = e.runSteady(ctx, cfg)
	} else {
		r.ThroughputRun, err = e.runBulk(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	r.finish()
	return r, nil
}

// counter counts handled tasks and closes reached when the count reaches target.
type counter struct {
	n       atomic.Int64
	target  int64
	reached chan struct{}
}

func newCounter(target int64) *counter { return &counter{target: target, reached: make(chan struct{})} }

func (c *counter) add() {
	if c.n.Add(1) == c.target {
		close(c.reached)
	}
}

// noopHandlers are the built-in no-op handler's twin, counting what it runs.
func noopHandlers(c *counter) *taskorch.Handlers {
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[builtinhandlers.NoopArgs]) error {
		c.add()
		return nil
	})
	return hs
}

const noopType = "taskorch.noop"

// enqueueNoops enqueues n no-op tasks with method ("many" or "copy"); with keys above 0, their
// payloads spread over that many values of "k".
func (e *Env) enqueueNoops(ctx context.Context, n int, method string, keys int) error {
	payload := func(i int) []byte {
		if keys > 0 {
			return []byte(fmt.Sprintf(`{"k": %d}`, i%keys))
		}
		return []byte("{}")
	}
	if method == "copy" {
		_, err := e.admin.CopyFrom(ctx, pgx.Identifier{"queues", "task"}, []string{"task_type", "payload"},
			pgx.CopyFromSlice(n, func(i int) ([]any, error) { return []any{noopType, payload(i)}, nil }))
		return err
	}
	c, err := taskorch.NewClient(e.admin, nil)
	if err != nil {
		return err
	}
	const batch = 5000
	params := make([]taskorch.EnqueueParams, min(n, batch))
	for i := range params {
		params[i] = taskorch.EnqueueParams{Args: builtinhandlers.NoopArgs{}}
		if keys > 0 {
			params[i] = taskorch.EnqueueParams{Args: taskorch.RawArgs{Type: noopType, Payload: payload(i)}}
		}
	}
	for done := 0; done < n; done += batch {
		if _, err := c.EnqueueMany(ctx, params[:min(batch, n-done)]); err != nil {
			return err
		}
		e.progress.phase("enqueueing: %s of %s", humanize.Thousands(int64(min(done+batch, n))), humanize.Thousands(int64(n)))
	}
	return nil
}

// runBulk enqueues cfg.Tasks no-op tasks, then starts the workers and times them from their
// start to the moment the last completion is committed.
func (e *Env) runBulk(ctx context.Context, cfg ThroughputConfig) (ThroughputRun, error) {
	return e.runBulkWith(ctx, cfg, func(ctx context.Context) error {
		return e.enqueueNoops(ctx, cfg.Tasks, cfg.Enqueue, cfg.LimitKeys)
	})
}

// runBulkWith is runBulk with enqueue putting the cfg.Tasks no-op tasks in the queue.
func (e *Env) runBulkWith(ctx context.Context, cfg ThroughputConfig, enqueue func(context.Context) error) (ThroughputRun, error) {
	return e.runBulkHandlers(ctx, cfg, enqueue, noopHandlers)
}

// runBulkHandlers is runBulkWith with the workers' handlers made by handlers, which count each
// task they finish on the counter.
func (e *Env) runBulkHandlers(ctx context.Context, cfg ThroughputConfig, enqueue func(context.Context) error,
	handlers func(*counter) *taskorch.Handlers) (ThroughputRun, error) {
	run := ThroughputRun{Tasks: int64(cfg.Tasks), Workers: cfg.Workers, Concurrency: cfg.Concurrency,
		FetchBatch: cfg.FetchBatch, Metrics: cfg.Metrics, Enqueue: cfg.Enqueue, LimitKeys: cfg.LimitKeys}
	if cfg.LimitKeys > 0 {
		if _, err := e.admin.Exec(ctx, `select queues.set_limit($1, _max_running => 1, _key_field => 'k')`, noopType); err != nil {
			return run, fmt.Errorf("bench: set the limit: %w", err)
		}
		defer func() { _, _ = e.admin.Exec(context.WithoutCancel(ctx), `select queues.remove_limit($1)`, noopType) }()
	}
	e.checkpoint(ctx)
	mark, err := e.taskMark(ctx)
	if err != nil {
		return run, err
	}
	e.progress.phase("enqueueing %s tasks", humanize.Thousands(run.Tasks))
	t0 := time.Now()
	if err := enqueue(ctx); err != nil {
		return run, fmt.Errorf("bench: enqueue: %w", err)
	}
	enq := time.Since(t0)
	run.EnqueueSeconds, run.EnqueueTasksPerSecond = seconds(enq), rate(run.Tasks, enq)
	if _, err := e.admin.Exec(ctx, `analyze queues.task`); err != nil {
		return run, err
	}

	pool, err := e.workerPool(ctx, cfg.WorkerOptions, 0)
	if err != nil {
		return run, err
	}
	defer pool.Close()
	count := newCounter(run.Tasks)
	hs := handlers(count)
	if cfg.handlers != nil {
		if hs, err = cfg.handlers(count); err != nil {
			return run, err
		}
	}
	cpu0 := e.cpuNow()
	start := time.Now()
	g, err := e.startWorkers(ctx, pool, cfg.WorkerOptions, taskorch.WorkerConfig{Handlers: hs})
	if err != nil {
		return run, err
	}
	defer g.stop()
	if err := e.waitCount(ctx, count, start, "working"); err != nil {
		return run, err
	}
	if err := e.waitNoneRunning(ctx); err != nil {
		return run, err
	}
	took := time.Since(start)
	run.CPU = cpuCost(cpu0, e.cpuNow(), run.Tasks, runtime.NumCPU())
	g.stop()
	run.Seconds, run.TasksPerSecond = seconds(took), rate(run.Tasks, took)

	var completed int64
	if err := e.admin.QueryRow(ctx, `select count(*) from queues.task where task_id > $1 and status = 'completed'`, mark).Scan(&completed); err != nil {
		return run, err
	}
	if completed != run.Tasks {
		return run, fmt.Errorf("bench: %d of %d tasks completed", completed, run.Tasks)
	}
	e.progress.clear()
	return run, nil
}

// waitCount waits until c reaches its target, showing progress; it gives up when nothing
// moves for a minute.
func (e *Env) waitCount(ctx context.Context, c *counter, start time.Time, what string) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last, lastMoved := int64(-1), time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.reached:
			return nil
		case now := <-tick.C:
			n := c.n.Load()
			e.progress.phase("%s: %s of %s (%s/s)", what, humanize.Thousands(n), humanize.Thousands(c.target), humanize.Thousands(int64(rate(n, now.Sub(start)))))
			if n != last {
				last, lastMoved = n, now
			} else if now.Sub(lastMoved) > time.Minute {
				return fmt.Errorf("bench: stalled at %d of %d tasks for a minute (see the workers' log)", n, c.target)
			}
		}
	}
}

// waitNoneRunning waits until no task is running: every handler has returned and the last
// completions are committed.
func (e *Env) waitNoneRunning(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var running bool
		if err := e.admin.QueryRow(ctx, `select exists (select 1 from queues.task where status = 'running')`).Scan(&running); err != nil {
			return err
		}
		if !running {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("bench: tasks still running a minute after their handlers returned")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// runSteady enqueues while the workers work, keeping a backlog of a few claims' worth, and
// measures the tasks handled in the window after the warm-up.
func (e *Env) runSteady(ctx context.Context, cfg ThroughputConfig) (ThroughputRun, error) {
	run := ThroughputRun{Workers: cfg.Workers, Concurrency: cfg.Concurrency, FetchBatch: cfg.FetchBatch,
		Metrics: cfg.Metrics, Steady: true, Enqueue: "many"}
	e.checkpoint(ctx)
	pool, err := e.workerPool(ctx, cfg.WorkerOptions, 0)
	if err != nil {
		return run, err
	}
	defer pool.Close()
	count := newCounter(-1)
	c, err := taskorch.NewClient(e.admin, nil)
	if err != nil {
		return run, err
	}
	const batch = 1000
	params := make([]taskorch.EnqueueParams, batch)
	for i := range params {
		params[i] = taskorch.EnqueueParams{Args: builtinhandlers.NoopArgs{}}
	}
	perClaim := cfg.FetchBatch
	if perClaim == 0 {
		perClaim = defaultFetchBatchMax(cfg.Concurrency)
	}
	target := int64(max(4*batch, 2*cfg.Workers*perClaim))
	var enqueued atomic.Int64
	ectx, stopEnqueue := context.WithCancel(ctx)
	defer stopEnqueue()
	enqErr := make(chan error, 1)
	go func() {
		for ectx.Err() == nil {
			if enqueued.Load()-count.n.Load() >= target {
				time.Sleep(time.Millisecond)
				continue
			}
			if _, err := c.EnqueueMany(ectx, params); err != nil {
				if ectx.Err() == nil {
					enqErr <- err
				}
				return
			}
			enqueued.Add(batch)
		}
	}()

	g, err := e.startWorkers(ctx, pool, cfg.WorkerOptions, taskorch.WorkerConfig{Handlers: noopHandlers(count)})
	if err != nil {
		return run, err
	}
	defer g.stop()
	wait := func(d time.Duration, what string) error {
		end := time.Now().Add(d)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for time.Now().Before(end) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-enqErr:
				return fmt.Errorf("bench: enqueue: %w", err)
			case <-tick.C:
				e.progress.phase("%s: %s handled, %s left", what, humanize.Thousands(count.n.Load()), time.Until(end).Round(time.Second))
			}
		}
		return nil
	}
	if err := e.waitFirstHandled(ctx, count, enqErr); err != nil {
		return run, err
	}
	if err := wait(cfg.Warmup, "warming up"); err != nil {
		return run, err
	}
	t1, n1, q1, cpu1 := time.Now(), count.n.Load(), enqueued.Load(), e.cpuNow()
	if err := wait(cfg.Duration, "steady"); err != nil {
		return run, err
	}
	t2, n2, q2, cpu2 := time.Now(), count.n.Load(), enqueued.Load(), e.cpuNow()
	stopEnqueue()
	g.stop()
	run.Tasks = n2 - n1
	run.CPU = cpuCost(cpu1, cpu2, run.Tasks, runtime.NumCPU())
	run.Seconds, run.TasksPerSecond = seconds(t2.Sub(t1)), rate(run.Tasks, t2.Sub(t1))
	run.EnqueueTasksPerSecond = rate(q2-q1, t2.Sub(t1))
	e.progress.clear()
	return run, nil
}
