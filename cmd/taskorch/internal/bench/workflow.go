package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/taskorch/taskorch/internal/humanize"
)

// WorkflowConfig configures Workflow.
type WorkflowConfig struct {
	WorkerOptions // Concurrency defaults to 200.

	// Diamonds is how many diamonds (a task, then two after it, then one after both: 4 tasks)
	// are enqueued, then worked. Defaults to 10,000.
	Diamonds int
	// Rounds is how many runs each side gets; the sides alternate (the independent tasks first
	// in odd rounds), and the medians are reported. Defaults to 3.
	Rounds int
}

// WorkflowResult is Workflow's result.
type WorkflowResult struct {
	Header
	Diamonds int `json:"diamonds"`
	Rounds   int `json:"rounds"`
	// Baseline is the median run of `bench throughput` with as many independent no-op tasks
	// (4 per diamond); BaselineRuns are every round's tasks/s, in order.
	Baseline     ThroughputRun `json:"baseline"`
	BaselineRuns []float64     `json:"baseline_runs"`
	// Workflow is the diamonds' median run: the same no-op tasks, three in four waiting for
	// parents; WorkflowRuns are every round's tasks/s, in order.
	Workflow     ThroughputRun `json:"workflow"`
	WorkflowRuns []float64     `json:"workflow_runs"`
	// BaselineTasksPerSecond and WorkflowTasksPerSecond are the medians, and Ratio is theirs
	// (workflow ÷ baseline).
	BaselineTasksPerSecond float64 `json:"baseline_tasks_per_second"`
	WorkflowTasksPerSecond float64 `json:"workflow_tasks_per_second"`
	Ratio                  float64 `json:"ratio"`
}

// Table implements Result.
func (r *WorkflowResult) Table() []Row {
	return append(r.headerRows(),
		Row{"diamonds", fmt.Sprintf("%s (1 → 2 → 1: %s no-op tasks, bulk-enqueued, then worked)", humanize.Thousands(int64(r.Diamonds)), humanize.Thousands(r.Workflow.Tasks))},
		Row{"workers", fmt.Sprintf("%d in-process, concurrency %d each, fetch batch %s", r.Workflow.Workers, r.Workflow.Concurrency, fetchBatchText(r.Workflow.FetchBatch))},
		Row{"throughput (independent)", fmt.Sprintf("%s tasks/s (median of %s), median run %.3f s, %s", humanize.Thousands(int64(r.BaselineTasksPerSecond)), ratesText(r.BaselineRuns), r.Baseline.Seconds, r.Baseline.CPU)},
		Row{"throughput (diamonds)", fmt.Sprintf("%s tasks/s (median of %s), median run %.3f s, %s", humanize.Thousands(int64(r.WorkflowTasksPerSecond)), ratesText(r.WorkflowRuns), r.Workflow.Seconds, r.Workflow.CPU)},
		Row{"ratio", fmt.Sprintf("%.2f of the independent tasks (the medians'; %d rounds, alternating)", r.Ratio, r.Rounds)},
	)
}

// diamondsSQL enqueues %d diamonds in one transaction: a root, two children after it
// (enqueue_many's shared _after), and a sink after both.
const diamondsSQL = `do $$
declare
    _root bigint;
    _mid bigint[];
begin
    for _i in 1..%d loop
        _root := queues.enqueue('taskorch.noop', '{}');
        _mid := queues.enqueue_many(array['taskorch.noop', 'taskorch.noop'], array['{}', '{}']::jsonb[], _after => array[_root]);
        perform queues.enqueue('taskorch.noop', '{}', _after => _mid);
    end loop;
end $$`

// Workflow measures diamonds against independent tasks in the same run: `bench throughput` with
// 4 × Diamonds no-op tasks, and the diamonds, each bulk-enqueued and then worked by the same
// in-process workers, timed from their start to the last completion; Rounds times each,
// alternating. A run of either side lasts a second or two, so the rounds' medians are reported.
func Workflow(ctx context.Context, e *Env, cfg WorkflowConfig) (*WorkflowResult, error) {
	if cfg.Diamonds <= 0 {
		cfg.Diamonds = 10_000
	}
	tc, err := ThroughputConfig{WorkerOptions: cfg.WorkerOptions, Tasks: 4 * cfg.Diamonds}.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	r := &WorkflowResult{Header: e.header("workflow"), Diamonds: cfg.Diamonds, Rounds: cfg.Rounds}
	diamonds := func(ctx context.Context) error {
		const batch = 1000
		for done := 0; done < cfg.Diamonds; done += batch {
			if _, err := e.admin.Exec(ctx, fmt.Sprintf(diamondsSQL, min(batch, cfg.Diamonds-done))); err != nil {
				return err
			}
			e.progress.phase("enqueueing: %s of %s diamonds", humanize.Thousands(int64(min(done+batch, cfg.Diamonds))), humanize.Thousands(int64(cfg.Diamonds)))
		}
		return nil
	}
	var baselines, workflows []ThroughputRun
	for round := 1; round <= cfg.Rounds; round++ {
		sides := []string{"baseline", "diamonds"}
		if round%2 == 0 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if side == "baseline" {
				run, err := e.runBulk(ctx, tc)
				if err != nil {
					return nil, err
				}
				baselines, r.BaselineRuns = append(baselines, run), append(r.BaselineRuns, run.TasksPerSecond)
				continue
			}
			run, err := e.runBulkWith(ctx, tc, diamonds)
			if err != nil {
				return nil, err
			}
			run.Enqueue = "diamonds"
			workflows, r.WorkflowRuns = append(workflows, run), append(r.WorkflowRuns, run.TasksPerSecond)
		}
	}
	r.Baseline, r.Workflow = medianRun(baselines), medianRun(workflows)
	r.BaselineTasksPerSecond, r.WorkflowTasksPerSecond = r.Baseline.TasksPerSecond, r.Workflow.TasksPerSecond
	if r.BaselineTasksPerSecond > 0 {
		r.Ratio = r.WorkflowTasksPerSecond / r.BaselineTasksPerSecond
	}
	r.finish()
	return r, nil
}

// medianRun is the run of runs whose rate is their median (medianOf's).
func medianRun(runs []ThroughputRun) ThroughputRun {
	rates := make([]float64, len(runs))
	for i, run := range runs {
		rates[i] = run.TasksPerSecond
	}
	m := medianOf(rates)
	for _, run := range runs {
		if run.TasksPerSecond == m {
			return run
		}
	}
	return ThroughputRun{}
}

// ratesText lists rates as "31,200 · 29,800 · 33,100" (tasks/s, in run order).
func ratesText(rates []float64) string {
	s := make([]string, len(rates))
	for i, v := range rates {
		s[i] = humanize.Thousands(int64(v))
	}
	return strings.Join(s, " · ")
}
