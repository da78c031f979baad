package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/taskorch/taskorch/internal/humanize"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
)

// LatencyConfig configures Latency.
type LatencyConfig struct {
	WorkerOptions // Concurrency defaults to 100.

	// Rate is how many tasks are enqueued per second, one per transaction, on a fixed schedule
	// (an open loop: a slow enqueue does not delay the next arrival). Defaults to 1,000.
	Rate int
	// Duration is how long tasks arrive (measured). Defaults to 10s.
	Duration time.Duration
	// Warmup is how long tasks arrive before the measured ones. Defaults to 1s.
	Warmup time.Duration
	// Enqueuers is how many connections enqueue (in parallel): enough that a slow commit does
	// not hold up the next arrivals. Defaults to 64.
	Enqueuers int
	// NotifyCoalesceMS, when set, is queues.settings.notify_coalesce_ms for the run; the
	// database's value is put back after it. Nil keeps the database's value.
	NotifyCoalesceMS *int
}

func (c LatencyConfig) withDefaults() LatencyConfig {
	c.WorkerOptions = c.WorkerOptions.withDefaults(100)
	if c.Rate <= 0 {
		c.Rate = 1000
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	} else if c.Warmup == 0 {
		c.Warmup = time.Second
	}
	if c.Enqueuers <= 0 {
		c.Enqueuers = 64
	}
	return c
}

// LatencyResult is Latency's result. All latencies are in milliseconds.
type LatencyResult struct {
	Header
	Rate            int     `json:"rate"`
	DurationSeconds float64 `json:"duration_seconds"`
	Tasks           int     `json:"tasks"`
	AchievedRate    float64 `json:"achieved_rate"`
	Workers         int     `json:"workers"`
	Concurrency     int     `json:"concurrency"`
	// NotifyCoalesceMS is queues.notify_coalesce_ms() during the run: 0 is one NOTIFY per
	// enqueue.
	NotifyCoalesceMS int `json:"notify_coalesce_ms"`
	// Start is enqueue→start: from just before the enqueuing statement is sent to the moment the
	// handler starts, on the bench process's monotonic clock (enqueuer and worker share it). It
	// includes the enqueue's own round trip and commit.
	Start Percentiles `json:"start_ms"`
	// Complete is enqueue→complete: from the same moment to the moment the worker's completion
	// statement for the task returned (committed), on the same clock.
	Complete Percentiles `json:"complete_ms"`
	// StartAfterEnqueue is from the enqueue call's return (the commit acknowledged: the task is
	// visible) to the handler starting: the queue's own part of Start.
	StartAfterEnqueue Percentiles `json:"start_after_enqueue_ms"`
	// Enqueue is the enqueue call alone (statement and commit).
	Enqueue Percentiles `json:"enqueue_ms"`
	// DBClaim and DBComplete are the database's view: claimed_at and completed_at minus
	// enqueued_at (each the start time of its transaction, on the server's clock), for a check.
	DBClaim    Percentiles `json:"db_claim_ms"`
	DBComplete Percentiles `json:"db_complete_ms"`
	// Late counts arrivals whose enqueue began more than 5 ms after its scheduled time (all
	// enqueuers were busy): the offered rate was not kept.
	Late int `json:"late_arrivals"`
}

// Table implements Result.
func (r *LatencyResult) Table() []Row {
	return append(r.headerRows(),
		Row{"arrivals", fmt.Sprintf("%d/s for %.0f s: %s tasks, achieved %s/s, %d late", r.Rate, r.DurationSeconds,
			humanize.Thousands(int64(r.Tasks)), humanize.Thousands(int64(r.AchievedRate)), r.Late)},
		Row{"workers", fmt.Sprintf("%d in-process, concurrency %d each", r.Workers, r.Concurrency)},
		Row{"wake-ups", r.wakeups()},
		Row{"enqueue→start", r.Start.String()},
		Row{"enqueue→complete", r.Complete.String()},
		Row{"enqueue call", r.Enqueue.String()},
		Row{"enqueue returned→start", r.StartAfterEnqueue.String()},
		Row{"database: claimed_at−enqueued_at", r.DBClaim.String()},
		Row{"database: completed_at−enqueued_at", r.DBComplete.String()},
	)
}

func (r *LatencyResult) wakeups() string {
	switch r.Listen {
	case "none":
		return "none: the workers poll (--poll-only)"
	case "direct":
		return r.notifies() + ", heard on a direct LISTEN connection (--listen-database-url)"
	}
	return r.notifies()
}

func (r *LatencyResult) notifies() string {
	if r.NotifyCoalesceMS <= 0 {
		return "a NOTIFY per enqueue (queues.notify_coalesce_ms() = 0)"
	}
	return fmt.Sprintf("coalesced: no NOTIFY within %d ms of the last (queues.notify_coalesce_ms())", r.NotifyCoalesceMS)
}

type latencyArgs struct {
	Seq int `json:"seq"`
}

const latencyType = "taskorch.bench.latency"

func (latencyArgs) TaskType() string { return latencyType }

// completionTracer notes when each task's completion statement (queues.complete_tasks or
// queues.complete_tasks_with_results, the one the worker calls since results) returned
// on the worker's pool: the client-side moment the completion is committed.
type completionTracer struct {
	mu   sync.Mutex
	done map[int64]time.Time
}

type tracedIDs struct{}

// TraceQueryStart implements pgx.QueryTracer.
func (t *completionTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if (strings.Contains(d.SQL, "queues.complete_tasks(") || strings.Contains(d.SQL, "queues.complete_tasks_with_results(")) && len(d.Args) > 0 {
		if ids, ok := d.Args[0].([]int64); ok {
			return context.WithValue(ctx, tracedIDs{}, ids)
		}
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *completionTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	ids, ok := ctx.Value(tracedIDs{}).([]int64)
	if !ok || d.Err != nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if _, seen := t.done[id]; !seen {
			t.done[id] = now
		}
	}
}

func (t *completionTracer) at(id int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.done[id]
	return v, ok
}

// Latency enqueues tasks one at a time at a fixed rate while an idle-ish worker (woken by
// LISTEN/NOTIFY) runs them, and reports enqueue→start and enqueue→complete percentiles.
func Latency(ctx context.Context, e *Env, cfg LatencyConfig) (*LatencyResult, error) {
	cfg = cfg.withDefaults()
	r := &LatencyResult{Header: e.header("latency"), Rate: cfg.Rate, DurationSeconds: cfg.Duration.Seconds(),
		Workers: cfg.Workers, Concurrency: cfg.Concurrency}
	warm := int(cfg.Warmup.Seconds() * float64(cfg.Rate))
	total := warm + int(cfg.Duration.Seconds()*float64(cfg.Rate))
	if total-warm < 1 {
		return nil, fmt.Errorf("bench: %d/s for %s is no task at all", cfg.Rate, cfg.Duration)
	}
	e.checkpoint(ctx)
	mark, err := e.taskMark(ctx)
	if err != nil {
		return nil, err
	}
	ms, restore, err := e.notifyCoalesce(ctx, cfg.NotifyCoalesceMS)
	if err != nil {
		return nil, err
	}
	defer restore()
	r.NotifyCoalesceMS = ms

	// What each task went through, by its sequence number.
	sent := make([]time.Time, total)     // the enqueue began
	enqueued := make([]time.Time, total) // the enqueue returned
	started := make([]time.Time, total)  // the handler started
	taskIDs := make([]int64, total)
	var mu sync.Mutex // started, taskIDs (written by handlers)
	count := newCounter(int64(total))
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(_ context.Context, t *taskorch.TaskFor[latencyArgs]) error {
		now := time.Now()
		if s := t.Args.Seq; s >= 0 && s < total {
			mu.Lock()
			first := started[s].IsZero()
			if first {
				started[s], taskIDs[s] = now, t.ID
			}
			mu.Unlock()
			if first {
				count.add()
			}
		}
		return nil
	})

	tracer := &completionTracer{done: map[int64]time.Time{}}
	pool, err := e.NewPool(ctx, int32(cfg.Workers*connsPerWorker), tracer) //nolint:gosec // small
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	enqPool, err := e.NewPool(ctx, int32(cfg.Enqueuers), nil) //nolint:gosec // small
	if err != nil {
		return nil, err
	}
	defer enqPool.Close()
	client, err := taskorch.NewClient(enqPool, nil)
	if err != nil {
		return nil, err
	}
	// Open the enqueuers' connections before the clock starts.
	for range cfg.Enqueuers {
		if _, err := enqPool.Exec(ctx, `select 1`); err != nil {
			return nil, err
		}
	}

	g, err := e.startWorkers(ctx, pool, cfg.WorkerOptions, taskorch.WorkerConfig{Handlers: hs})
	if err != nil {
		return nil, err
	}
	defer g.stop()
	// Wait until the workers claim: a first task gets through.
	if err := e.latencyWarmStart(ctx, client, count); err != nil {
		return nil, err
	}

	// The arrivals: a scheduler hands out sequence numbers on time; enqueuers send them.
	interval := time.Second / time.Duration(cfg.Rate)
	seqs := make(chan int, total)
	late := make([]bool, total)
	errc := make(chan error, cfg.Enqueuers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range cfg.Enqueuers {
		wg.Go(func() {
			for s := range seqs {
				now := time.Now()
				late[s] = now.Sub(t0.Add(time.Duration(s)*interval)) > 5*time.Millisecond
				sent[s] = now
				if _, err := client.Enqueue(ctx, latencyArgs{Seq: s}, nil); err != nil {
					errc <- err
					return
				}
				enqueued[s] = time.Now()
			}
		})
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
schedule:
	for s := range total {
		if d := time.Until(t0.Add(time.Duration(s) * interval)); d > 0 {
			time.Sleep(d)
		}
		select {
		case <-ctx.Done():
			break schedule
		case err := <-errc:
			close(seqs)
			wg.Wait()
			return nil, fmt.Errorf("bench: enqueue: %w", err)
		case <-tick.C:
			e.progress.phase("latency: %s of %s enqueued, %s started", humanize.Thousands(int64(s)), humanize.Thousands(int64(total)), humanize.Thousands(count.n.Load()))
		default:
		}
		seqs <- s
	}
	close(seqs)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	arrivals := time.Since(t0)
	select {
	case err := <-errc:
		return nil, fmt.Errorf("bench: enqueue: %w", err)
	default:
	}
	if err := e.waitCount(ctx, count, t0, "latency: started"); err != nil {
		return nil, err
	}
	// Then every completion.
	deadline := time.Now().Add(time.Minute)
	for i := warm; i < total; {
		if _, ok := tracer.at(taskIDs[i]); ok {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: task %d's completion was not seen (does the completer still call queues.complete_tasks or complete_tasks_with_results?)", taskIDs[i])
		}
		time.Sleep(time.Millisecond)
	}
	g.stop()

	var startLat, completeLat, enqLat, afterLat []time.Duration
	for s := warm; s < total; s++ {
		done, _ := tracer.at(taskIDs[s])
		startLat = append(startLat, started[s].Sub(sent[s]))
		completeLat = append(completeLat, done.Sub(sent[s]))
		enqLat = append(enqLat, enqueued[s].Sub(sent[s]))
		afterLat = append(afterLat, started[s].Sub(enqueued[s]))
		if late[s] {
			r.Late++
		}
	}
	r.Tasks = total - warm
	r.AchievedRate = rate(int64(total), arrivals)
	r.Start, r.Complete, r.Enqueue = percentiles(startLat), percentiles(completeLat), percentiles(enqLat)
	r.StartAfterEnqueue = percentiles(afterLat)
	if r.DBClaim, r.DBComplete, err = e.dbLatencies(ctx, mark, warm); err != nil {
		return nil, err
	}
	e.progress.clear()
	r.finish()
	return r, nil
}

// latencyWarmStart enqueues one unmeasured task (sequence -1) and waits until a worker has run
// it, so that the measured arrivals find the workers listening.
func (e *Env) latencyWarmStart(ctx context.Context, c *taskorch.Client, count *counter) error {
	// Sequence numbers outside the measured range are run but not counted; poll the database.
	res, err := c.Enqueue(ctx, latencyArgs{Seq: -1}, nil)
	if err != nil {
		return fmt.Errorf("bench: enqueue: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var done bool
		if err := e.admin.QueryRow(ctx, `select status = 'completed' from queues.task where task_id = $1`, res.TaskID).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the workers did not run a first task within 30 s (%d counted)", count.n.Load())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// dbLatencies reads the database's timestamps of the measured tasks.
func (e *Env) dbLatencies(ctx context.Context, mark int64, warm int) (claim, complete Percentiles, err error) {
	q := `select coalesce(percentile_disc(array[0.5, 0.9, 0.99]) within group (order by d), '{0,0,0}'), coalesce(max(d), 0)
		from (select extract(epoch from %s - enqueued_at) * 1000 as d from queues.task
		      where task_id > $1 and task_type = $2 and (payload ->> 'seq')::int >= $3) s`
	read := func(col string) (Percentiles, error) {
		var ps []float64
		var mx float64
		if err := e.admin.QueryRow(ctx, fmt.Sprintf(q, col), mark, latencyType, warm).Scan(&ps, &mx); err != nil {
			return Percentiles{}, err
		}
		return Percentiles{P50: round3(ps[0]), P90: round3(ps[1]), P99: round3(ps[2]), Max: round3(mx)}, nil
	}
	if claim, err = read("claimed_at"); err != nil {
		return
	}
	complete, err = read("completed_at")
	return
}
