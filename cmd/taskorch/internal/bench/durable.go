package bench

import (
	"context"
	"fmt"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/humanize"
)

// DurableConfig configures Durable.
type DurableConfig struct {
	WorkerOptions // Concurrency defaults to 200.

	// Workflows is how many durable workflows are enqueued, then worked. Defaults to 10,000.
	Workflows int
	// Steps is each workflow's number of Steps (no-op, each checkpointed). Defaults to 5.
	Steps int
}

// DurableResult is Durable's result.
type DurableResult struct {
	Header
	Workflows int `json:"workflows"`
	Steps     int `json:"steps_per_workflow"`
	// Baseline is `bench throughput` with as many independent no-op tasks as the workflows have
	// steps in all.
	Baseline ThroughputRun `json:"baseline"`
	// Durable is the workflows' run: each a task whose handler makes Steps checkpointed steps.
	Durable ThroughputRun `json:"durable"`
	// BaselineTasksPerSecond, WorkflowsPerSecond, StepsPerSecond and Ratio (steps/s ÷ tasks/s)
	// repeat the figures.
	BaselineTasksPerSecond float64 `json:"baseline_tasks_per_second"`
	WorkflowsPerSecond     float64 `json:"workflows_per_second"`
	StepsPerSecond         float64 `json:"steps_per_second"`
	Ratio                  float64 `json:"ratio"`
}

// Table implements Result.
func (r *DurableResult) Table() []Row {
	return append(r.headerRows(),
		Row{"workflows", fmt.Sprintf("%s durable workflows of %d no-op Steps each, bulk-enqueued, then worked", humanize.Thousands(int64(r.Workflows)), r.Steps)},
		Row{"workers", fmt.Sprintf("%d in-process, concurrency %d each, fetch batch %s", r.Durable.Workers, r.Durable.Concurrency, fetchBatchText(r.Durable.FetchBatch))},
		Row{"throughput (independent)", fmt.Sprintf("%s tasks/s in %.3f s, %s", humanize.Thousands(int64(r.BaselineTasksPerSecond)), r.Baseline.Seconds, r.Baseline.CPU)},
		Row{"throughput (workflows)", fmt.Sprintf("%s workflows/s, %s steps/s in %.3f s, %s", humanize.Thousands(int64(r.WorkflowsPerSecond)),
			humanize.Thousands(int64(r.StepsPerSecond)), r.Durable.Seconds, r.Durable.CPU)},
		Row{"ratio", fmt.Sprintf("%.2f: steps/s of the independent tasks/s", r.Ratio)},
	)
}

const durableType = "bench.durable"

type durableArgs struct{}

func (durableArgs) TaskType() string { return durableType }

// durableHandlers is a workflow of steps no-op Steps, counting the workflows it finishes.
func durableHandlers(steps int) func(*counter) *taskorch.Handlers {
	names := make([]string, steps)
	for i := range names {
		names[i] = fmt.Sprintf("step-%d", i+1)
	}
	return func(c *counter) *taskorch.Handlers {
		hs := taskorch.NewHandlers()
		taskorch.AddWorkflow(hs, func(_ context.Context, wf *taskorch.Workflow, _ durableArgs) error {
			for i, name := range names {
				if _, err := taskorch.Step(wf, name, func(context.Context) (int, error) { return i, nil }); err != nil {
					return err
				}
			}
			c.add()
			return nil
		})
		return hs
	}
}

// Durable measures durable workflows (docs/workflows.md, "Durable workflows in Go") against
// independent tasks in the same run: first `bench throughput` with Workflows × Steps no-op tasks,
// then Workflows workflows of Steps no-op Steps each, each bulk-enqueued and then worked by the
// same in-process workers, timed from their start to the last completion. A Step costs one
// checkpoint statement, committed on its own, where a task costs an enqueue, a claim and a
// completion shared with others.
func Durable(ctx context.Context, e *Env, cfg DurableConfig) (*DurableResult, error) {
	if cfg.Workflows <= 0 {
		cfg.Workflows = 10_000
	}
	if cfg.Steps <= 0 {
		cfg.Steps = 5
	}
	bc, err := ThroughputConfig{WorkerOptions: cfg.WorkerOptions, Tasks: cfg.Workflows * cfg.Steps}.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &DurableResult{Header: e.header("workflows"), Workflows: cfg.Workflows, Steps: cfg.Steps}
	if r.Baseline, err = e.runBulk(ctx, bc); err != nil {
		return nil, err
	}
	wc := bc
	wc.Tasks = cfg.Workflows
	r.Durable, err = e.runBulkHandlers(ctx, wc, func(ctx context.Context) error {
		const batch = 5000
		for done := 0; done < cfg.Workflows; done += batch {
			n := min(batch, cfg.Workflows-done)
			if _, err := e.admin.Exec(ctx, `select queues.enqueue_many(array_fill($1::text, array[$2::int]), array_fill('{}'::jsonb, array[$2::int]))`,
				durableType, n); err != nil {
				return err
			}
			e.progress.phase("enqueueing: %s of %s workflows", humanize.Thousands(int64(done+n)), humanize.Thousands(int64(cfg.Workflows)))
		}
		return nil
	}, durableHandlers(cfg.Steps))
	if err != nil {
		return nil, err
	}
	r.Durable.Enqueue = "workflows"
	r.BaselineTasksPerSecond, r.WorkflowsPerSecond = r.Baseline.TasksPerSecond, r.Durable.TasksPerSecond
	r.StepsPerSecond = r.WorkflowsPerSecond * float64(cfg.Steps)
	if r.BaselineTasksPerSecond > 0 {
		r.Ratio = r.StepsPerSecond / r.BaselineTasksPerSecond
	}
	r.finish()
	return r, nil
}
