package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/humanize"
)

// RateConfig configures Rate.
type RateConfig struct {
	WorkerOptions // Workers defaults to 3, Concurrency to 16.

	// Rate is the limit's claims per second (queues.set_limit's _rate_per_second). Defaults to 20.
	Rate float64
	// Burst is the limit's burst. Defaults to 1: every claim must come as its token does, so the
	// delivered rate shows what the claim's latency costs.
	Burst int
	// Duration is the span measured, after Warmup. Defaults to 20s.
	Duration time.Duration
	// Warmup is how long the workers run before the span starts. Defaults to 2s.
	Warmup time.Duration
}

func (c RateConfig) withDefaults() (RateConfig, error) {
	if c.Workers <= 0 {
		c.Workers = 3
	}
	c.WorkerOptions = c.WorkerOptions.withDefaults(16)
	if c.Rate == 0 {
		c.Rate = 20
	}
	if c.Burst == 0 {
		c.Burst = 1
	}
	if c.Duration == 0 {
		c.Duration = 20 * time.Second
	}
	if c.Warmup == 0 {
		c.Warmup = 2 * time.Second
	}
	switch {
	case c.Rate < 0 || c.Rate > 100_000 || math.IsNaN(c.Rate):
		return c, fmt.Errorf("bench: --rate must be above 0 and at most 100,000, got %v", c.Rate)
	case c.Burst < 1:
		return c, fmt.Errorf("bench: --burst must be at least 1, got %d", c.Burst)
	case c.Duration < time.Second || c.Duration > time.Hour:
		return c, fmt.Errorf("bench: --duration must be between 1s and 1h, got %s", c.Duration)
	case c.Warmup < 0 || c.Warmup > time.Hour:
		return c, fmt.Errorf("bench: --warmup must be between 0 and 1h, got %s", c.Warmup)
	}
	return c, nil
}

// RateResult is Rate's result.
type RateResult struct {
	Header
	Rate        float64 `json:"rate_per_second"`
	Burst       int     `json:"burst"`
	Workers     int     `json:"workers"`
	Concurrency int     `json:"concurrency"`
	Tasks       int64   `json:"tasks"`
	// Claims is the claims whose claimed_at falls in the measured span, of Seconds.
	Claims  int64   `json:"claims"`
	Seconds float64 `json:"seconds"`
	// Delivered is Claims ÷ Seconds; Share is Delivered ÷ Rate.
	Delivered float64 `json:"delivered_per_second"`
	Share     float64 `json:"share_of_rate"`
	// MaxInASecond is the most claims in any second of claimed_at over the whole run, and
	// Ceiling what the limit allows in one: Burst + Rate.
	MaxInASecond int64   `json:"max_claims_in_a_second"`
	Ceiling      float64 `json:"ceiling_in_a_second"`
}

// Table implements Result.
func (r *RateResult) Table() []Row {
	return append(r.headerRows(),
		Row{"limit", fmt.Sprintf("%s claims/s, burst %d, on one task type with a backlog", fmtRate(r.Rate), r.Burst)},
		Row{"workers", fmt.Sprintf("%d in-process, %d slots each, no-op handlers", r.Workers, r.Concurrency)},
		Row{"delivered", fmt.Sprintf("%s claims/s (%s claims in %.1f s of claimed_at): %.1f%% of the rate", fmtRate(r.Delivered), humanize.Thousands(r.Claims), r.Seconds, 100*r.Share)},
		Row{"ceiling", fmt.Sprintf("at most %d claims in any second (burst + rate: %s)", r.MaxInASecond, fmtRate(r.Ceiling))},
	)
}

func fmtRate(v float64) string { return fmt.Sprintf("%.4g", v) }

// Rate measures how much of a rate limit the workers deliver under a backlog: the limit is
// set on the no-op type, a backlog larger than the run can claim is enqueued, the workers run
// Warmup + Duration, and the claims of the span are counted by their claimed_at (the clock the
// limiter keeps, docs/limits.md). It also reports the most claims in any second, against the
// ceiling the limit promises.
func Rate(ctx context.Context, e *Env, cfg RateConfig) (*RateResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &RateResult{Header: e.header("rate"), Rate: cfg.Rate, Burst: cfg.Burst, Workers: cfg.Workers, Concurrency: cfg.Concurrency,
		Ceiling: float64(cfg.Burst) + cfg.Rate}
	if _, err := e.admin.Exec(ctx, `select queues.set_limit($1, _rate_per_second => $2, _burst => $3)`, noopType, cfg.Rate, cfg.Burst); err != nil {
		return nil, fmt.Errorf("bench: set the limit: %w", err)
	}
	defer func() { _, _ = e.admin.Exec(context.WithoutCancel(ctx), `select queues.remove_limit($1)`, noopType) }()
	mark, err := e.taskMark(ctx)
	if err != nil {
		return nil, err
	}
	span := cfg.Warmup + cfg.Duration
	r.Tasks = int64(math.Ceil(cfg.Rate*span.Seconds()*1.5)) + int64(cfg.Burst) + 100
	e.progress.phase("enqueueing %s tasks", humanize.Thousands(r.Tasks))
	if err := e.enqueueNoops(ctx, int(r.Tasks), "many", 0); err != nil {
		return nil, fmt.Errorf("bench: enqueue: %w", err)
	}
	pool, err := e.workerPool(ctx, cfg.WorkerOptions, 0)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	count := newCounter(r.Tasks)
	g, err := e.startWorkers(ctx, pool, cfg.WorkerOptions, taskorch.WorkerConfig{Handlers: noopHandlers(count)})
	if err != nil {
		return nil, err
	}
	defer g.stop()
	if err := e.waitFirstHandled(ctx, count, nil); err != nil {
		return nil, err
	}
	var from time.Time
	if err := e.admin.QueryRow(ctx, `select clock_timestamp() + $1::interval`, cfg.Warmup.String()).Scan(&from); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(span)
	for time.Now().Before(deadline) {
		e.progress.phase("working at the limit: %s claimed", humanize.Thousands(count.n.Load()))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond): //nolint:forbidigo // a benchmark's clock
		}
	}
	g.stop()
	to := from.Add(cfg.Duration)
	if err := e.admin.QueryRow(ctx, `select count(*) from queues.task
		where task_id > $1 and claimed_at >= $2 and claimed_at < $3`, mark, from, to).Scan(&r.Claims); err != nil {
		return nil, err
	}
	if err := e.admin.QueryRow(ctx, `select coalesce(max(n), 0) from (
		select count(*) as n from queues.task a join queues.task b
		  on b.task_id > $1 and b.claimed_at >= a.claimed_at and b.claimed_at < a.claimed_at + interval '1 second'
		where a.task_id > $1 and a.claimed_at is not null group by a.task_id) w`, mark).Scan(&r.MaxInASecond); err != nil {
		return nil, err
	}
	r.Seconds = cfg.Duration.Seconds()
	r.Delivered = float64(r.Claims) / r.Seconds
	r.Share = r.Delivered / cfg.Rate
	r.finish()
	e.progress.clear()
	return r, nil
}
