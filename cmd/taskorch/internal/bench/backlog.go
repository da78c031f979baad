package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskorch/taskorch/internal/humanize"
)

// BacklogConfig configures Backlog.
type BacklogConfig struct {
	// Throughput is the run measured, with and without the history.
	Throughput ThroughputConfig
	// History is how many finished tasks are put in the tables first. Defaults to 1,000,000.
	History int
	// NoBaseline skips the empty-table runs (and so the ratio).
	NoBaseline bool
	// Rounds is how many runs each side gets; the figures are the medians. With a database of
	// its own, the baseline runs in a second database created for it and the runs alternate
	// (baseline, history, baseline, ...) so that both sides see the same load on a shared
	// machine; in place, the baseline runs come before the history is added. Defaults to 3.
	Rounds int
}

// BacklogResult is Backlog's result.
type BacklogResult struct {
	Header
	History int64 `json:"history"`
	// FillSeconds is how long inserting the history (and vacuuming it) took.
	FillSeconds float64 `json:"history_fill_seconds"`
	// Paired says the baseline ran in a database of its own, alternating with the history runs.
	Paired bool `json:"paired"`
	Rounds int  `json:"rounds"`
	// TasksPerSecond is the median run with the history; BaselineTasksPerSecond the median run
	// on the empty tables, in the same invocation; Ratio the first over the second.
	TasksPerSecond         float64 `json:"tasks_per_second"`
	BaselineTasksPerSecond float64 `json:"baseline_tasks_per_second,omitempty"`
	Ratio                  float64 `json:"ratio,omitempty"`
	// CPURatio is the baseline's CPU per task (client and server) over the history runs': the
	// same comparison by cost, which a busy machine disturbs less than the wall clock.
	CPURatio float64 `json:"cpu_ratio,omitempty"`
	// Backlog and Baseline are the median runs; BacklogRuns and BaselineRuns every run's
	// tasks per second, in order.
	Backlog      ThroughputRun  `json:"backlog"`
	Baseline     *ThroughputRun `json:"baseline,omitempty"`
	BacklogRuns  []float64      `json:"backlog_runs"`
	BaselineRuns []float64      `json:"baseline_runs,omitempty"`
}

// Table implements Result.
func (r *BacklogResult) Table() []Row {
	how := "after the baseline, in the same database"
	if r.Paired {
		how = "runs alternating with the baseline's, which has a database of its own"
	}
	rows := append(r.headerRows(),
		Row{"history", fmt.Sprintf("%s finished tasks (with leases and events), inserted in %.1f s", humanize.Thousands(r.History), r.FillSeconds)},
		Row{"rounds", fmt.Sprintf("%d a side, %s; medians", r.Rounds, how)})
	if r.Baseline != nil {
		rows = append(rows, Row{"empty tables", fmt.Sprintf("%s tasks/s (runs %s), CPU %s", humanize.Thousands(int64(r.BaselineTasksPerSecond)),
			runList(r.BaselineRuns), r.Baseline.CPU)})
	}
	rows = append(rows, Row{"with history", fmt.Sprintf("%s tasks/s (runs %s), CPU %s", humanize.Thousands(int64(r.TasksPerSecond)),
		runList(r.BacklogRuns), r.Backlog.CPU)})
	if r.Baseline != nil {
		rows = append(rows, Row{"ratio", fmt.Sprintf("%.1f%% of the empty-table figure (by CPU per task: %.1f%%)", 100*r.Ratio, 100*r.CPURatio)})
	}
	return append(rows, r.Backlog.runRows()[:2]...)
}

func runList(rs []float64) string {
	s := make([]string, len(rs))
	for i, v := range rs {
		s[i] = humanize.Thousands(int64(v))
	}
	return strings.Join(s, " / ")
}

// Backlog compares Throughput on empty tables with Throughput after cfg.History finished tasks
// were put in them.
func Backlog(ctx context.Context, e *Env, cfg BacklogConfig) (res *BacklogResult, err error) {
	tc, err := cfg.Throughput.withDefaults()
	if err != nil {
		return nil, err
	}
	if tc.Steady {
		return nil, errors.New("bench: the backlog mode measures bulk runs, not steady ones")
	}
	if cfg.History <= 0 {
		cfg.History = 1_000_000
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	r := &BacklogResult{Header: e.header("backlog"), History: int64(cfg.History), Rounds: cfg.Rounds}

	var base *Env // where the baseline runs: a second database, or this one before the fill
	if !cfg.NoBaseline {
		if base, err = e.sibling(ctx); err != nil {
			return nil, err
		}
		if base != nil {
			r.Paired = true
			defer func() { err = errors.Join(err, base.Close(ctx)) }()
		}
	}
	var baseRuns, backlogRuns []ThroughputRun
	runs := func(env *Env, into *[]ThroughputRun) error {
		run, err := env.runBulk(ctx, tc)
		if err != nil {
			return err
		}
		*into = append(*into, run)
		return nil
	}
	if !cfg.NoBaseline && !r.Paired {
		for range cfg.Rounds {
			if err := runs(e, &baseRuns); err != nil {
				return nil, err
			}
		}
	}
	t0 := time.Now()
	if err := e.fillHistory(ctx, cfg.History); err != nil {
		return nil, err
	}
	r.FillSeconds = round1(time.Since(t0).Seconds())
	for range cfg.Rounds {
		if r.Paired {
			if err := runs(base, &baseRuns); err != nil {
				return nil, err
			}
		}
		if err := runs(e, &backlogRuns); err != nil {
			return nil, err
		}
	}

	r.Backlog, r.BacklogRuns = median(backlogRuns)
	r.TasksPerSecond = r.Backlog.TasksPerSecond
	if len(baseRuns) > 0 {
		b, list := median(baseRuns)
		r.Baseline, r.BaselineRuns, r.BaselineTasksPerSecond = &b, list, b.TasksPerSecond
		if b.TasksPerSecond > 0 {
			r.Ratio = round3(r.TasksPerSecond / b.TasksPerSecond)
		}
		if cb, ck := medianCPU(baseRuns), medianCPU(backlogRuns); cb > 0 && ck > 0 {
			r.CPURatio = round3(cb / ck)
		}
	}
	r.finish()
	return r, nil
}

// median returns the run with the median throughput (the lower middle one of an even number)
// and every run's throughput in order.
func median(runs []ThroughputRun) (ThroughputRun, []float64) {
	list := make([]float64, len(runs))
	for i, r := range runs {
		list[i] = r.TasksPerSecond
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b ThroughputRun) int {
		switch {
		case a.TasksPerSecond < b.TasksPerSecond:
			return -1
		case a.TasksPerSecond > b.TasksPerSecond:
			return 1
		}
		return 0
	})
	return sorted[(len(sorted)-1)/2], list
}

// medianCPU is the median of the runs' CPU per task (client and server).
func medianCPU(runs []ThroughputRun) float64 {
	cs := make([]float64, len(runs))
	for i, r := range runs {
		cs[i] = r.CPU.Client + r.CPU.Server
	}
	slices.Sort(cs)
	return cs[(len(cs)-1)/2]
}

// historyChunk is how many finished tasks one statement inserts.
const historyChunk = 250_000

// fillHistory inserts n completed tasks as the real path leaves them: the task row (completed,
// attempt 1, under its lease) and its task_lease row (a claim and a completion write no event). Ids come
// from the tables' own sequences. Then it vacuums and analyzes the three tables, as autovacuum
// would have on a system that made that history over time, and checkpoints.
func (e *Env) fillHistory(ctx context.Context, n int) error {
	const fillSQL = `
with g as materialized (
    select nextval(%s::regclass) as task_id,
           nextval(%s::regclass) as lease_id,
           i,
           $2::timestamptz - make_interval(secs => i %% 86400) as at
    from generate_series(1, $1::int) i
), l as (
    insert into queues.task_lease (task_lease_id, task_id, worker_id, attempt, leased_at, expires_at)
    overriding system value
    select lease_id, task_id, 'bench-history', 1, at, at + interval '5 minutes' from g
)
insert into queues.task (task_id, task_type, payload, status, attempt, lease_id, worker_id,
                         enqueued_at, scheduled_at, run_at, claimed_at, completed_at)
select task_id, 'taskorch.noop', jsonb_build_object('n', i), 'completed', 1, lease_id, 'bench-history',
       at, at, at, at, at
from g`
	// The sequences' names are looked up once, not per row.
	var now time.Time
	var taskSeq, leaseSeq string
	if err := e.admin.QueryRow(ctx, `select now() - interval '1 minute',
		quote_literal(pg_get_serial_sequence('queues.task', 'task_id')),
		quote_literal(pg_get_serial_sequence('queues.task_lease', 'task_lease_id'))`).Scan(&now, &taskSeq, &leaseSeq); err != nil {
		return err
	}
	// The day partitions of the days the history spans, as the leader would have kept them
	// (docs/design.md, "Partitioned history"), so it does not all land in the default partitions.
	if _, err := e.admin.Exec(ctx, `select internal.history_partition(t, d)
		from unnest(array['task_lease', 'task_event']) t,
		     (select (($1::timestamptz - g * interval '1 day') at time zone 'UTC')::date as d from generate_series(0, 1) g) days`,
		now); err != nil {
		return fmt.Errorf("bench: create the history's partitions: %w", err)
	}
	fill := fmt.Sprintf(fillSQL, taskSeq, leaseSeq)
	t0 := time.Now()
	for done := 0; done < n; done += historyChunk {
		k := min(historyChunk, n-done)
		e.progress.phase("history: %s of %s finished tasks (%s/s)", humanize.Thousands(int64(done)), humanize.Thousands(int64(n)),
			humanize.Thousands(int64(rate(int64(done), time.Since(t0)))))
		if _, err := e.admin.Exec(ctx, fill, k, now); err != nil {
			return fmt.Errorf("bench: fill the history: %w", err)
		}
	}
	for _, t := range []string{"queues.task", "queues.task_lease", "queues.task_event"} {
		e.progress.phase("history: vacuum analyze %s", t)
		if _, err := e.admin.Exec(ctx, "vacuum analyze "+t); err != nil {
			return fmt.Errorf("bench: vacuum %s: %w", t, err)
		}
	}
	e.checkpoint(ctx)
	e.progress.clear()
	return nil
}
