package bench

import (
	"context"
	"fmt"

	"github.com/taskorch/taskorch/internal/humanize"
)

// WorkflowConfig configures Workflow.
type WorkflowConfig struct {
	WorkerOptions // Concurrency defaults to 200.

	// Diamonds is how many diamonds (a task, then two after it, then one after both: 4 tasks)
	// are enqueued, then worked. Defaults to 10,000.
	Diamonds int
}

// WorkflowResult is Workflow's result.
type WorkflowResult struct {
	Header
	Diamonds int `json:"diamonds"`
	// Baseline is `bench throughput` with as many independent no-op tasks (4 per diamond).
	Baseline ThroughputRun `json:"baseline"`
	// Workflow is the diamonds' run: the same no-op tasks, three in four waiting for parents.
	Workflow ThroughputRun `json:"workflow"`
	// BaselineTasksPerSecond, WorkflowTasksPerSecond and Ratio (workflow ÷ baseline) repeat the
	// two figures.
	BaselineTasksPerSecond float64 `json:"baseline_tasks_per_second"`
	WorkflowTasksPerSecond float64 `json:"workflow_tasks_per_second"`
	Ratio                  float64 `json:"ratio"`
}

// Table implements Result.
func (r *WorkflowResult) Table() []Row {
	return append(r.headerRows(),
		Row{"diamonds", fmt.Sprintf("%s (1 → 2 → 1: %s no-op tasks, bulk-enqueued, then worked)", humanize.Thousands(int64(r.Diamonds)), humanize.Thousands(r.Workflow.Tasks))},
		Row{"workers", fmt.Sprintf("%d in-process, concurrency %d each, fetch batch %s", r.Workflow.Workers, r.Workflow.Concurrency, fetchBatchText(r.Workflow.FetchBatch))},
		Row{"throughput (independent)", fmt.Sprintf("%s tasks/s in %.3f s, %s", humanize.Thousands(int64(r.BaselineTasksPerSecond)), r.Baseline.Seconds, r.Baseline.CPU)},
		Row{"throughput (diamonds)", fmt.Sprintf("%s tasks/s in %.3f s, %s", humanize.Thousands(int64(r.WorkflowTasksPerSecond)), r.Workflow.Seconds, r.Workflow.CPU)},
		Row{"ratio", fmt.Sprintf("%.2f of the independent tasks", r.Ratio)},
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

// Workflow measures diamonds against independent tasks in the same run: first `bench
// throughput` with 4 × Diamonds no-op tasks, then the diamonds, each bulk-enqueued and then
// worked by the same in-process workers, timed from their start to the last completion.
func Workflow(ctx context.Context, e *Env, cfg WorkflowConfig) (*WorkflowResult, error) {
	if cfg.Diamonds <= 0 {
		cfg.Diamonds = 10_000
	}
	tc, err := ThroughputConfig{WorkerOptions: cfg.WorkerOptions, Tasks: 4 * cfg.Diamonds}.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &WorkflowResult{Header: e.header("workflow"), Diamonds: cfg.Diamonds}
	if r.Baseline, err = e.runBulk(ctx, tc); err != nil {
		return nil, err
	}
	r.Workflow, err = e.runBulkWith(ctx, tc, func(ctx context.Context) error {
		const batch = 1000
		for done := 0; done < cfg.Diamonds; done += batch {
			if _, err := e.admin.Exec(ctx, fmt.Sprintf(diamondsSQL, min(batch, cfg.Diamonds-done))); err != nil {
				return err
			}
			e.progress.phase("enqueueing: %s of %s diamonds", humanize.Thousands(int64(min(done+batch, cfg.Diamonds))), humanize.Thousands(int64(cfg.Diamonds)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.Workflow.Enqueue = "diamonds"
	r.BaselineTasksPerSecond, r.WorkflowTasksPerSecond = r.Baseline.TasksPerSecond, r.Workflow.TasksPerSecond
	if r.BaselineTasksPerSecond > 0 {
		r.Ratio = r.WorkflowTasksPerSecond / r.BaselineTasksPerSecond
	}
	r.finish()
	return r, nil
}
