package taskorch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/admin"
)

// ParentResult is one parent of a task (EnqueueOpts.After) with its outcome: its status and its
// result as committed with its completion (docs/workflows.md, "Results").
type ParentResult struct {
	// ID is the parent's task id.
	ID int64 `json:"task_id"`
	// Status is the parent's status; "" when the parent was deleted since (retention).
	Status Status `json:"status,omitempty"`
	// Result is what the parent returned (Task.Result); nil when it returned none, did not
	// complete, or was deleted.
	Result json.RawMessage `json:"result,omitempty"`
}

const parentResultsSQL = `select c.task_id is not null, a.id, p.status::text, p.result
from (select 1) one
left join queues.task c on c.task_id = $1
left join lateral unnest(c.after_ids) as a(id) on true
left join queues.task p on p.task_id = a.id
order by a.id`

// ParentResults returns the parents of task id in id order, each with its status and result
// (empty for a task without parents), or ErrNotFound. A handler calls it with its task's id
// (Task.ParentIDs lists the same parents); it reads one row per parent, only when called: the
// claim does not read parents' results.
func (c *Client) ParentResults(ctx context.Context, id int64) ([]ParentResult, error) {
	return c.parentResults(ctx, c.pool, id)
}

// ParentResultsTx is ParentResults in the caller's transaction.
func (c *Client) ParentResultsTx(ctx context.Context, tx pgx.Tx, id int64) ([]ParentResult, error) {
	return c.parentResults(ctx, tx, id)
}

func (c *Client) parentResults(ctx context.Context, db DBTX, id int64) ([]ParentResult, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, parentResultsSQL, id)
	if err != nil {
		return nil, fmt.Errorf("parent results of task %d: %w", id, mapError(err))
	}
	out := []ParentResult{}
	exists := false
	var pid *int64
	var status *string
	var result []byte
	_, err = pgx.ForEachRow(rows, []any{&exists, &pid, &status, &result}, func() error {
		if pid == nil {
			return nil
		}
		r := ParentResult{ID: *pid}
		if status != nil {
			r.Status = Status(*status)
		}
		if result != nil {
			r.Result = append(json.RawMessage(nil), result...)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("parent results of task %d: %w", id, mapError(err))
	}
	if !exists {
		return nil, fmt.Errorf("parent results of task %d: %w", id, ErrNotFound)
	}
	return out, nil
}

// WorkflowNode is one task of a workflow.
type WorkflowNode struct {
	ID      int64   `json:"task_id"`
	Type    string  `json:"task_type"`
	Status  Status  `json:"status"`
	Attempt int     `json:"attempt"`
	Parents []int64 `json:"parents,omitempty"` // the tasks it waits for (Task.ParentIDs)
}

// WorkflowGraph is a graph of tasks enqueued after one another (docs/workflows.md, "Workflows"):
// its first task, whose id is the workflow's, and every task that took that id from its
// parents.
type WorkflowGraph struct {
	ID int64 `json:"workflow_id"`
	// Nodes are its tasks in id order (parents before children); each lists its parents, which
	// are the graph's edges. A parent from another workflow (a task enqueued after tasks of two
	// workflows belongs to the older one) appears in Parents but not in Nodes.
	Nodes []WorkflowNode `json:"nodes"`
}

// maxWorkflowNodes bounds what Workflow reads.
const maxWorkflowNodes = 100_000

const workflowSQL = `select task_id, task_type, status::text, attempt, after_ids
from queues.task
where task_id = $1 and workflow_id is null
union all
(select t.task_id, t.task_type, t.status::text, t.attempt, t.after_ids
 from queues.workflow_task w
 join queues.task t on t.task_id = w.task_id
 where w.workflow_id = $1
 order by w.task_id
 limit $2)
order by task_id`

// Workflow returns the workflow with the given id (the id of its first task) and its tasks, or
// ErrNotFound when no task belongs to a workflow with that id (an unknown id, a task with
// neither parents nor children, a task that is not a workflow's first). At most 100,000 nodes
// are read; a larger workflow gives ErrInvalidInput.
func (c *Client) Workflow(ctx context.Context, id int64) (*WorkflowGraph, error) {
	return c.workflow(ctx, c.pool, id)
}

// WorkflowTx is Workflow in the caller's transaction.
func (c *Client) WorkflowTx(ctx context.Context, tx pgx.Tx, id int64) (*WorkflowGraph, error) {
	return c.workflow(ctx, tx, id)
}

func (c *Client) workflow(ctx context.Context, db DBTX, id int64) (*WorkflowGraph, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, workflowSQL, id, maxWorkflowNodes+1)
	if err != nil {
		return nil, fmt.Errorf("workflow %d: %w", id, mapError(err))
	}
	w := &WorkflowGraph{ID: id, Nodes: []WorkflowNode{}}
	var n WorkflowNode
	var status string
	_, err = pgx.ForEachRow(rows, []any{&n.ID, &n.Type, &status, &n.Attempt, &n.Parents}, func() error {
		n.Status = Status(status)
		w.Nodes = append(w.Nodes, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("workflow %d: %w", id, mapError(err))
	}
	// Only the first task was found: it has no children, so there is no workflow.
	if len(w.Nodes) <= 1 {
		return nil, fmt.Errorf("workflow %d: %w", id, ErrNotFound)
	}
	if len(w.Nodes) > maxWorkflowNodes+1 {
		return nil, inputErrorf("workflow %d has more than %d tasks; read it with SQL (queues.workflow_task)", id, maxWorkflowNodes)
	}
	return w, nil
}

// WorkflowCancel is what CancelWorkflow did.
type WorkflowCancel struct {
	// Cancelled counts the tasks the call cancelled; tasks that had ended already stay as they are.
	Cancelled int64 `json:"cancelled"`
	// Skipped counts the tasks still not ended whose row another transaction held each time
	// (a completion or a lease renewal in flight): call CancelWorkflow again.
	Skipped int64 `json:"skipped"`
}

// CancelWorkflow cancels every task of workflow id that has not ended: waiting, pending, running
// (its worker is told at commit and the handler's outcome is refused), failed and dead tasks;
// completed and cancelled ones stay as they are. reason (empty: "workflow N cancelled") is
// recorded in each task's cancelled event with the database role as the actor. A task whose
// row another transaction holds is never waited for: it is tried again a few times over about
// two seconds, then counted in Skipped. An id that is no workflow's gives ErrNotFound. The
// Client's role needs execute on queues.cancel_workflow, an operator's function
// (docs/security.md, "An operator's role"; docs/workflows.md, "Cancelling a workflow").
func (c *Client) CancelWorkflow(ctx context.Context, id int64, reason string) (*WorkflowCancel, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	res, err := admin.CancelWorkflow(ctx, c.pool, id, "", reason)
	switch {
	case errors.Is(err, admin.ErrWorkflowNotFound):
		return nil, fmt.Errorf("cancel workflow %d: %w", id, ErrNotFound)
	case errors.Is(err, admin.ErrInvalidInput):
		return nil, inputErrorf("cancel workflow %d: %s", id, strings.TrimPrefix(err.Error(), admin.ErrInvalidInput.Error()+": "))
	case err != nil:
		return nil, fmt.Errorf("cancel workflow %d: %w", id, mapError(err))
	}
	return &WorkflowCancel{Cancelled: res.Cancelled, Skipped: res.Skipped}, nil
}

// WorkflowSummary is a workflow and how many of its tasks are in each status.
type WorkflowSummary struct {
	ID     int64          `json:"workflow_id"`
	Tasks  int            `json:"tasks"`
	Counts map[Status]int `json:"counts"`
}

// Workflows returns the most recent workflows (by id, newest first), at most limit of them
// (default 20 when limit <= 0; at most 1,000), with their tasks counted by status.
func (c *Client) Workflows(ctx context.Context, limit int) ([]WorkflowSummary, error) {
	return c.workflows(ctx, c.pool, limit)
}

// WorkflowsTx is Workflows in the caller's transaction.
func (c *Client) WorkflowsTx(ctx context.Context, tx pgx.Tx, limit int) ([]WorkflowSummary, error) {
	return c.workflows(ctx, tx, limit)
}

func (c *Client) workflows(ctx context.Context, db DBTX, limit int) ([]WorkflowSummary, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	switch {
	case limit <= 0:
		limit = 20
	case limit > 1000:
		return nil, inputErrorf("workflows: limit %d is over 1000", limit)
	}
	rows, err := db.Query(ctx, `with w as (
    select distinct workflow_id from queues.workflow_task
    order by workflow_id desc limit $1)
select w.workflow_id, t.status::text, count(*)
from w
join lateral (
    select status from queues.task where task_id = w.workflow_id
    union all
    select t.status from queues.workflow_task m join queues.task t on t.task_id = m.task_id
    where m.workflow_id = w.workflow_id) t on true
group by w.workflow_id, t.status
order by w.workflow_id desc`, limit)
	if err != nil {
		return nil, fmt.Errorf("workflows: %w", mapError(err))
	}
	var out []WorkflowSummary
	var id int64
	var status string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &status, &n}, func() error {
		if len(out) == 0 || out[len(out)-1].ID != id {
			out = append(out, WorkflowSummary{ID: id, Counts: map[Status]int{}})
		}
		s := &out[len(out)-1]
		s.Counts[Status(status)] += n
		s.Tasks += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("workflows: %w", mapError(err))
	}
	if out == nil {
		out = []WorkflowSummary{}
	}
	return out, nil
}
