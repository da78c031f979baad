package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
	"github.com/taskorch/taskorch/internal/humanize"
)

// PressureConfig configures Pressure.
type PressureConfig struct {
	WorkerOptions // Concurrency defaults to 100.

	// Rate is how many tasks a second the producer enqueues, on a fixed schedule whatever the
	// queue does (an open loop). Defaults to 2,000.
	Rate int
	// Phase is each phase's length. Defaults to 60s.
	Phase time.Duration
	// Warmup is how long the producer and the workers run before the clean phase, from the first
	// task handled (the workers' start-up is not in it). Defaults to 1s.
	Warmup time.Duration
	// Readers is how many REPEATABLE READ transactions scan the queue tables in the readers
	// phase. Defaults to 4.
	Readers int
	// ReaderPause is how long each reader waits, its snapshot held, between two scans. Zero
	// (the default) scans back to back: on a small machine the readers then take CPU the queue
	// needs, and the phase measures that as much as the snapshots.
	ReaderPause time.Duration
	// Phases are the phases to run, in the order clean, open_xid, readers, recovery; nil runs
	// them all. A sustained-load run is one long clean phase.
	Phases []string
	// Sample, when positive, also measures each phase in windows of this length (the last one
	// may be shorter): completions, claim durations, depth and queues.task's dead tuples and
	// vacuums, so that the end of a long phase can be compared with its start.
	Sample time.Duration
}

func (c PressureConfig) withDefaults() (PressureConfig, error) {
	c.WorkerOptions = c.WorkerOptions.withDefaults(100)
	switch {
	case c.Rate < 0 || c.Rate > 1_000_000:
		return c, fmt.Errorf("bench: --rate must be between 1 and 1,000,000 tasks a second, got %d", c.Rate)
	case c.Phase < 0 || (c.Phase > 0 && c.Phase < 100*time.Millisecond) || c.Phase > 24*time.Hour:
		return c, fmt.Errorf("bench: --phase must be between 100ms and 24h, got %s", c.Phase)
	case c.Readers < 0 || c.Readers > 64:
		return c, fmt.Errorf("bench: --readers must be between 1 and 64, got %d", c.Readers)
	case c.ReaderPause < 0 || c.ReaderPause > time.Hour:
		return c, fmt.Errorf("bench: --reader-pause must be between 0 and 1h, got %s", c.ReaderPause)
	case c.Sample < 0 || (c.Sample > 0 && c.Sample < 100*time.Millisecond):
		return c, fmt.Errorf("bench: --sample must be at least 100ms (or 0: none), got %s", c.Sample)
	}
	if len(c.Phases) == 0 {
		c.Phases = allPhases
	}
	seen := map[string]int{}
	for i, name := range allPhases {
		seen[name] = i + 1
	}
	last := 0
	for _, name := range c.Phases {
		at := seen[name]
		switch {
		case at == 0:
			return c, fmt.Errorf("bench: --phases: unknown phase %q (clean, open_xid, readers, recovery)", name)
		case at <= last:
			return c, fmt.Errorf("bench: --phases: %q repeated or out of order (clean, open_xid, readers, recovery)", name)
		}
		last = at
	}
	if c.Rate == 0 {
		c.Rate = 2000
	}
	if c.Phase == 0 {
		c.Phase = time.Minute
	}
	if c.Readers == 0 {
		c.Readers = 4
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	} else if c.Warmup == 0 {
		c.Warmup = time.Second
	}
	return c, nil
}

// The phases of a pressure run, in order.
const (
	phaseClean    = "clean"
	phaseOpenXID  = "open_xid"
	phaseReaders  = "readers"
	phaseRecovery = "recovery"
)

var allPhases = []string{phaseClean, phaseOpenXID, phaseReaders, phaseRecovery}

// PressureResult is Pressure's result.
type PressureResult struct {
	Header
	Rate         int     `json:"rate"`
	PhaseSeconds float64 `json:"phase_seconds"`
	// WarmupSeconds is how long the producer and workers ran before the clean phase.
	WarmupSeconds float64 `json:"warmup_seconds"`
	Workers       int     `json:"workers"`
	Concurrency   int     `json:"concurrency"`
	Readers       int     `json:"readers"`
	ReaderPauseMS float64 `json:"reader_pause_ms"`
	// HolderXID is the transaction ID (txid_current()) the open-xid phase's transaction held.
	HolderXID int64 `json:"holder_xid"`
	// Phases are clean, open_xid, readers and recovery, in order.
	Phases []PressurePhase `json:"phases"`
	// Drained says the queue caught up in the recovery phase: the pending count at its end was
	// no more than at the clean phase's end plus 100 ms of arrivals. Absent without both phases.
	Drained       *bool   `json:"drained,omitempty"`
	SampleSeconds float64 `json:"sample_seconds,omitempty"`
}

// PressurePhase is what one phase measured.
type PressurePhase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// Enqueued is what the producer enqueued during the phase (below Rate × Seconds when its
	// commits could not keep up).
	Enqueued          int64   `json:"enqueued"`
	EnqueuedPerSecond float64 `json:"enqueued_per_second"`
	// Completed is how many handlers returned during the phase.
	Completed            int64   `json:"completed"`
	CompletionsPerSecond float64 `json:"completions_per_second"`
	// RatioToClean is CompletionsPerSecond ÷ the clean phase's.
	RatioToClean float64 `json:"ratio_to_clean"`
	// Claims is how many claim statements the workers ran; Claim their durations (the statement's
	// round trip with its rows, seen by a pgx tracer on the workers' pool), in milliseconds.
	Claims int         `json:"claims"`
	Claim  Percentiles `json:"claim_ms"`
	// Depth is the number of pending tasks at the phase's end.
	Depth int64 `json:"depth"`
	// Tables are pg_stat_user_tables' live and dead tuple estimates of every table in schema
	// queues at the phase's end (the server's statistics lag the backends by up to a second).
	Tables []TableStat `json:"tables"`
	// HolderBackendXID is pg_stat_activity.backend_xid of the open-xid phase's transaction,
	// read at the phase's end: the proof that an xid was held (0 in other phases).
	HolderBackendXID int64 `json:"holder_backend_xid,omitempty"`
	// ReaderSnapshots is how many readers pg_stat_activity showed with a snapshot
	// (backend_xmin) at the readers phase's end; ReaderScans is how many scans they finished.
	ReaderSnapshots int   `json:"reader_snapshots,omitempty"`
	ReaderScans     int64 `json:"reader_scans,omitempty"`
	// Samples are the phase's windows of PressureConfig.Sample, in order; LastToFirst compares
	// the last full one with the first (absent with fewer than two).
	Samples     []PressureSample `json:"samples,omitempty"`
	LastToFirst *SampleRatios    `json:"last_to_first,omitempty"`
}

// PressureSample is one window of a phase.
type PressureSample struct {
	// AtSeconds is the window's end, from the phase's start.
	AtSeconds            float64     `json:"at_seconds"`
	Seconds              float64     `json:"seconds"`
	Completed            int64       `json:"completed"`
	CompletionsPerSecond float64     `json:"completions_per_second"`
	EnqueuedPerSecond    float64     `json:"enqueued_per_second"`
	Claims               int         `json:"claims"`
	Claim                Percentiles `json:"claim_ms"`
	Depth                int64       `json:"depth"`
	// TaskLive and TaskDead are queues.task's n_live_tup and n_dead_tup at the window's end;
	// TaskVacuums counts its vacuums so far (autovacuum_count + vacuum_count), and
	// TaskDeadMax is the most dead tuples seen in the window (read every second).
	TaskLive    int64 `json:"task_n_live_tup"`
	TaskDead    int64 `json:"task_n_dead_tup"`
	TaskDeadMax int64 `json:"task_n_dead_tup_max"`
	TaskVacuums int64 `json:"task_vacuums"`
}

// SampleRatios compare a phase's last full window with its first: the throughput and the claim
// durations' p50 and p99 (last ÷ first).
type SampleRatios struct {
	CompletionsPerSecond float64 `json:"completions_per_second"`
	ClaimP50             float64 `json:"claim_p50"`
	ClaimP99             float64 `json:"claim_p99"`
}

// TableStat is one table's tuple estimates.
type TableStat struct {
	Table string `json:"table"`
	Live  int64  `json:"n_live_tup"`
	Dead  int64  `json:"n_dead_tup"`
}

// Table implements Result.
func (r *PressureResult) Table() []Row {
	rows := append(r.headerRows(),
		Row{"producer", fmt.Sprintf("%s tasks/s (EnqueueMany every 5 ms), phases of %s s after %s s of warm-up", humanize.Thousands(int64(r.Rate)), fmtMS(r.PhaseSeconds), fmtMS(r.WarmupSeconds))},
		Row{"workers", fmt.Sprintf("%d in-process, concurrency %d each", r.Workers, r.Concurrency)},
	)
	var pressure []string
	for _, p := range r.Phases {
		switch p.Name {
		case phaseOpenXID:
			pressure = append(pressure, fmt.Sprintf("open_xid: one transaction holding xid %d", r.HolderXID))
		case phaseReaders:
			pressure = append(pressure, fmt.Sprintf("readers: %d REPEATABLE READ transactions scanning task, task_lease, task_event, %s", r.Readers, readerPace(r.ReaderPauseMS)))
		}
	}
	if len(pressure) > 0 {
		rows = append(rows, Row{"pressure", strings.Join(pressure, "; ")})
	}
	for _, p := range r.Phases {
		rows = append(rows, Row{p.Name, fmt.Sprintf("%s completions/s (%.0f%% of clean), enqueued %s/s, depth %s at the end, claim %s",
			humanize.Thousands(int64(p.CompletionsPerSecond)), 100*p.RatioToClean, humanize.Thousands(int64(p.EnqueuedPerSecond)),
			humanize.Thousands(p.Depth), p.Claim.String())})
		var dead []string
		for _, t := range p.Tables {
			if t.Live > 0 || t.Dead > 0 {
				dead = append(dead, fmt.Sprintf("%s %s/%s", t.Table, humanize.Thousands(t.Dead), humanize.Thousands(t.Live)))
			}
		}
		rows = append(rows, Row{"  dead/live", strings.Join(dead, ", ")})
		switch p.Name {
		case phaseOpenXID:
			rows = append(rows, Row{"  held", fmt.Sprintf("backend_xid %d at the phase's end", p.HolderBackendXID)})
		case phaseReaders:
			rows = append(rows, Row{"  held", fmt.Sprintf("%d snapshots at the phase's end, %s scans", p.ReaderSnapshots, humanize.Thousands(p.ReaderScans))})
		}
		for _, w := range p.Samples {
			rows = append(rows, Row{fmt.Sprintf("  at %s s", fmtMS(w.AtSeconds)), fmt.Sprintf(
				"%s completions/s, claim p50 %s ms p99 %s ms, depth %s, task dead %s (max %s) / live %s, %d vacuums",
				humanize.Thousands(int64(w.CompletionsPerSecond)), fmtMS(w.Claim.P50), fmtMS(w.Claim.P99), humanize.Thousands(w.Depth),
				humanize.Thousands(w.TaskDead), humanize.Thousands(w.TaskDeadMax), humanize.Thousands(w.TaskLive), w.TaskVacuums)})
		}
		if l := p.LastToFirst; l != nil {
			rows = append(rows, Row{"  last ÷ first", fmt.Sprintf("completions/s %.2f, claim p50 %.2f, p99 %.2f",
				l.CompletionsPerSecond, l.ClaimP50, l.ClaimP99)})
		}
	}
	if r.Drained != nil {
		rows = append(rows, Row{"drained", fmt.Sprintf("%v (recovery's end depth vs clean's)", *r.Drained)})
	}
	return rows
}

// claimTracer times the workers' claim statements, by phase.
type claimTracer struct {
	mu    sync.Mutex
	phase int
	ds    [][]time.Duration
}

type claimStart struct{}

// TraceQueryStart implements pgx.QueryTracer.
func (t *claimTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if isClaim(d.SQL) {
		return context.WithValue(ctx, claimStart{}, time.Now())
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *claimTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	t0, ok := ctx.Value(claimStart{}).(time.Time)
	if !ok || d.Err != nil {
		return
	}
	took := time.Since(t0)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.phase >= 0 && t.phase < len(t.ds) {
		t.ds[t.phase] = append(t.ds[t.phase], took)
	}
}

// TraceBatchStart implements pgx.BatchTracer: the worker sends the claim after which it may
// wait in one batch with queues.worker_waiting (fetcher.go); the claim's time runs from the
// batch's start, one round trip like a claim alone.
func (t *claimTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if d.Batch != nil {
		for _, q := range d.Batch.QueuedQueries {
			if isClaim(q.SQL) {
				return context.WithValue(ctx, claimStart{}, time.Now())
			}
		}
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (t *claimTracer) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if isClaim(d.SQL) {
		t.TraceQueryEnd(ctx, c, pgx.TraceQueryEndData{CommandTag: d.CommandTag, Err: d.Err})
	}
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *claimTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func isClaim(sql string) bool {
	return strings.Contains(sql, "queues.claim_tasks(") || strings.Contains(sql, "queues.claim_limited_tasks(")
}

// cut returns the durations recorded in the current phase since the last cut.
func (t *claimTracer) cut(from int) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.phase < 0 || t.phase >= len(t.ds) || from > len(t.ds[t.phase]) {
		return nil
	}
	return append([]time.Duration(nil), t.ds[t.phase][from:]...)
}

// next moves to phase i (-1: none), returning the durations of the phase before.
func (t *claimTracer) next(i int) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var prev []time.Duration
	if t.phase >= 0 && t.phase < len(t.ds) {
		prev = t.ds[t.phase]
	}
	t.phase = i
	return prev
}

// producer enqueues no-op tasks at a fixed rate: every 5 ms, what is due by then (a slow
// commit makes the next batch bigger, not the schedule later).
type producer struct {
	client   *taskorch.Client
	rate     int
	enqueued atomic.Int64
	err      chan error
}

func (p *producer) run(ctx context.Context) {
	const maxBatch = 5000
	params := make([]taskorch.EnqueueParams, maxBatch)
	for i := range params {
		params[i] = taskorch.EnqueueParams{Args: builtinhandlers.NoopArgs{}}
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	t0 := time.Now()
	for {
		due := int64(time.Since(t0).Seconds()*float64(p.rate)) - p.enqueued.Load()
		if due > 0 {
			n := min(due, maxBatch)
			if _, err := p.client.EnqueueMany(ctx, params[:n]); err != nil {
				if ctx.Err() == nil {
					p.err <- err
				}
				return
			}
			p.enqueued.Add(n)
			continue // catch up before waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Pressure runs a steady open-loop producer and workers through four phases of --phase each:
// clean; open_xid, with one transaction holding an assigned xid (which keeps vacuum from
// removing any row version deleted since); readers, with REPEATABLE READ transactions scanning
// the queue tables, each holding its snapshot for the whole phase; and recovery. Per phase:
// completions/s against the clean phase's, claim durations, the queue's depth and the queue
// tables' dead tuples.
func Pressure(ctx context.Context, e *Env, cfg PressureConfig) (*PressureResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &PressureResult{Header: e.header("pressure"), Rate: cfg.Rate, PhaseSeconds: cfg.Phase.Seconds(),
		WarmupSeconds: cfg.Warmup.Seconds(), Workers: cfg.Workers, Concurrency: cfg.Concurrency, Readers: cfg.Readers,
		ReaderPauseMS: ms(cfg.ReaderPause), SampleSeconds: cfg.Sample.Seconds()}
	e.checkpoint(ctx)
	mark, err := e.taskMark(ctx)
	if err != nil {
		return nil, err
	}

	names := cfg.Phases
	tracer := &claimTracer{phase: -1, ds: make([][]time.Duration, len(names))}
	pool, err := e.NewPool(ctx, int32(min(cfg.Workers*connsPerWorker, 1000)), tracer) //nolint:gosec // bounded
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	enqPool, err := e.NewPool(ctx, 2, nil)
	if err != nil {
		return nil, err
	}
	defer enqPool.Close()
	client, err := taskorch.NewClient(enqPool, nil)
	if err != nil {
		return nil, err
	}
	count := newCounter(-1)
	g, err := e.startWorkers(ctx, pool, cfg.WorkerOptions, taskorch.WorkerConfig{Handlers: noopHandlers(count)})
	if err != nil {
		return nil, err
	}
	defer g.stop()
	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	prod := &producer{client: client, rate: cfg.Rate, err: make(chan error, 1)}
	prodDone := make(chan struct{})
	go func() { defer close(prodDone); prod.run(pctx) }()
	defer func() { stopProducer(); <-prodDone }()

	// wait waits d, showing progress; it stops early on the producer's error.
	wait := func(d time.Duration, what string) error {
		end := time.Now().Add(d)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for time.Now().Before(end) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-prod.err:
				return fmt.Errorf("bench: enqueue: %w", err)
			case <-tick.C:
				e.progress.phase("%s: %s enqueued, %s handled, %s left", what, humanize.Thousands(prod.enqueued.Load()),
					humanize.Thousands(count.n.Load()), time.Until(end).Round(time.Second))
			}
		}
		return nil
	}
	if err := e.waitFirstHandled(ctx, count, prod.err); err != nil {
		return nil, err
	}
	if err := wait(cfg.Warmup, "warming up"); err != nil {
		return nil, err
	}

	for i, name := range names {
		p := PressurePhase{Name: name}
		var hold *held
		switch name {
		case phaseOpenXID:
			hold, err = e.holdXID(ctx)
		case phaseReaders:
			hold, err = e.holdReaders(ctx, cfg.Readers, cfg.ReaderPause)
		}
		if err != nil {
			return nil, err
		}
		// The phase starts once its pressure is in place.
		tracer.next(i)
		t0, n0, q0 := time.Now(), count.n.Load(), prod.enqueued.Load()
		var t1 time.Time
		var n1, q1 int64
		if cfg.Sample > 0 {
			// The phase ends where its last window ends: the windows add up to it.
			p.Samples, t1, n1, q1, err = e.sampleWindows(ctx, cfg, mark, t0, n0, q0, tracer, count, prod, wait)
		} else {
			err = wait(cfg.Phase, "phase "+name)
			t1, n1, q1 = time.Now(), count.n.Load(), prod.enqueued.Load()
		}
		claims := tracer.next(-1)
		if err == nil {
			err = e.phaseEnd(ctx, &p, mark)
		}
		if hold != nil {
			if err == nil {
				err = hold.check(ctx, e, &p)
			}
			if name == phaseOpenXID {
				r.HolderXID = hold.xid
			}
			hold.release(ctx)
		}
		if err != nil {
			return nil, err
		}
		p.Seconds = seconds(t1.Sub(t0))
		p.Completed, p.CompletionsPerSecond = n1-n0, rate(n1-n0, t1.Sub(t0))
		p.Enqueued, p.EnqueuedPerSecond = q1-q0, rate(q1-q0, t1.Sub(t0))
		p.Claims, p.Claim = len(claims), percentiles(claims)
		p.LastToFirst = lastToFirst(p.Samples)
		r.Phases = append(r.Phases, p)
	}
	stopProducer()
	<-prodDone
	g.stop()

	clean := r.Phases[0].CompletionsPerSecond
	for i := range r.Phases {
		if clean > 0 {
			r.Phases[i].RatioToClean = round3(r.Phases[i].CompletionsPerSecond / clean)
		}
	}
	if first, last := r.Phases[0], r.Phases[len(r.Phases)-1]; first.Name == phaseClean && last.Name == phaseRecovery {
		drained := last.Depth <= first.Depth+int64(cfg.Rate/10)
		r.Drained = &drained
	}
	e.progress.clear()
	r.finish()
	return r, nil
}

// phaseEnd records the queue's depth and its tables' tuple counts in p, while the phase's
// pressure still holds.
func (e *Env) phaseEnd(ctx context.Context, p *PressurePhase, mark int64) error {
	if err := e.admin.QueryRow(ctx, `select count(*) from queues.task where task_id > $1 and status = 'pending'`, mark).Scan(&p.Depth); err != nil {
		return err
	}
	var err error
	p.Tables, err = e.queueTableStats(ctx)
	return err
}

// queueTableStats reads the live and dead tuple estimates of every table in schema queues, one
// row per logical table: a partitioned table's (task_lease, task_event) are the sums over its
// partitions (pg_partition_root), named after it.
func (e *Env) queueTableStats(ctx context.Context) ([]TableStat, error) {
	var out []TableStat
	err := pgx.BeginFunc(ctx, e.admin, func(tx pgx.Tx) error {
		// A fresh read of the statistics, not the snapshot this backend may have cached.
		if _, err := tx.Exec(ctx, `select pg_stat_clear_snapshot()`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `select r.relname, sum(s.n_live_tup)::bigint, sum(s.n_dead_tup)::bigint
			from pg_stat_user_tables s
			join pg_class r on r.oid = coalesce(pg_partition_root(s.relid), s.relid)
			where s.schemaname = 'queues'
			group by r.relname
			order by r.relname`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (TableStat, error) {
			var t TableStat
			return t, row.Scan(&t.Table, &t.Live, &t.Dead)
		})
		return err
	})
	return out, err
}

// readerPace says how the readers scan.
func readerPace(pauseMS float64) string {
	if pauseMS == 0 {
		return "back to back"
	}
	return fmtMS(pauseMS) + " ms apart"
}

// sampleWindows waits out a phase of cfg.Phase in windows of cfg.Sample, measuring each; it
// reads queues.task's dead tuples every second too, for the most each window saw.
// It returns the windows and the last one's end: time, completions and enqueued tasks.
func (e *Env) sampleWindows(ctx context.Context, cfg PressureConfig, mark int64, start time.Time, n0, q0 int64, tracer *claimTracer,
	count *counter, prod *producer, wait func(time.Duration, string) error) (out []PressureSample, w0 time.Time, _, _ int64, _ error) {
	end := start.Add(cfg.Phase)
	claimsSeen := 0
	w0 = start
	for w0.Before(end) {
		wEnd := w0.Add(cfg.Sample)
		if wEnd.After(end) {
			wEnd = end
		}
		var deadMax int64
		for now := time.Now(); now.Before(wEnd); now = time.Now() {
			if err := wait(min(time.Second, wEnd.Sub(now)), fmt.Sprintf("sample %d", len(out)+1)); err != nil {
				return out, w0, n0, q0, err
			}
			st, err := e.taskStat(ctx)
			if err != nil {
				return out, w0, n0, q0, err
			}
			deadMax = max(deadMax, st.dead)
		}
		t1, n1, q1 := time.Now(), count.n.Load(), prod.enqueued.Load()
		claims := tracer.cut(claimsSeen)
		claimsSeen += len(claims)
		w := PressureSample{AtSeconds: seconds(t1.Sub(start)), Seconds: seconds(t1.Sub(w0)), Completed: n1 - n0,
			CompletionsPerSecond: rate(n1-n0, t1.Sub(w0)), EnqueuedPerSecond: rate(q1-q0, t1.Sub(w0)),
			Claims: len(claims), Claim: percentiles(claims), TaskDeadMax: deadMax}
		if err := e.admin.QueryRow(ctx, `select count(*) from queues.task where task_id > $1 and status = 'pending'`, mark).Scan(&w.Depth); err != nil {
			return out, w0, n0, q0, err
		}
		st, err := e.taskStat(ctx)
		if err != nil {
			return out, w0, n0, q0, err
		}
		w.TaskLive, w.TaskDead, w.TaskVacuums = st.live, st.dead, st.vacuums
		w.TaskDeadMax = max(w.TaskDeadMax, st.dead)
		out = append(out, w)
		n0, q0, w0 = n1, q1, t1
	}
	return out, w0, n0, q0, nil
}

type taskStat struct{ live, dead, vacuums int64 }

// taskStat reads queues.task's tuple estimates and vacuum count, fresh.
func (e *Env) taskStat(ctx context.Context) (taskStat, error) {
	var st taskStat
	err := pgx.BeginFunc(ctx, e.admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `select pg_stat_clear_snapshot()`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `select n_live_tup, n_dead_tup, autovacuum_count + vacuum_count
			from pg_stat_user_tables where schemaname = 'queues' and relname = 'task'`).Scan(&st.live, &st.dead, &st.vacuums)
	})
	return st, err
}

// lastToFirst compares the last full window with the first; nil with fewer than two full
// windows (a last window shorter than the first is left out).
func lastToFirst(ws []PressureSample) *SampleRatios {
	if len(ws) > 1 && ws[len(ws)-1].Seconds < 0.9*ws[0].Seconds {
		ws = ws[:len(ws)-1]
	}
	if len(ws) < 2 {
		return nil
	}
	first, last := ws[0], ws[len(ws)-1]
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return round3(a / b)
	}
	return &SampleRatios{CompletionsPerSecond: div(last.CompletionsPerSecond, first.CompletionsPerSecond),
		ClaimP50: div(last.Claim.P50, first.Claim.P50), ClaimP99: div(last.Claim.P99, first.Claim.P99)}
}
