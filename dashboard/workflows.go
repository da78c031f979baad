package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
)

// Workflows (docs/workflows.md, "Workflows"): the list of the newest workflows with their tasks
// counted by status, and one workflow's graph drawn as an SVG (workflow_graph.go). Both read
// queues.workflow_task joined to queues.task in the page's read-only transaction, on the
// replica when there is one.

// workflowsShown bounds the workflows list.
const workflowsShown = 50

// workflowRow is a workflow on the list.
type workflowRow struct {
	ID         int64
	RootType   string
	Tasks      int64
	Counts     []statusCount // in taskorch.Statuses order, those with tasks
	Started    time.Time     // the first task's enqueue
	LastChange time.Time     // the latest enqueue, claim or end of any of its tasks
}

// statusCount is how many tasks of a workflow are in one status.
type statusCount struct {
	Status taskorch.Status
	N      int64
}

type workflowsData struct {
	Workflows []workflowRow
	Limit     int
	Before    int64 // the page's bound (workflows with smaller ids), 0 for the newest
	Older     int64 // the bound of the next page, 0 when there is none
}

// workflowsSQL lists the newest workflows (by id) below $1, with their tasks counted by
// status, their first task's enqueue time and the latest change of any of their tasks. A
// workflow's root keeps workflow_id NULL and is read by its id.
const workflowsSQL = `with w as (
    select distinct workflow_id from queues.workflow_task
    where workflow_id < $1
    order by workflow_id desc limit $2)
select w.workflow_id, t.status::text, count(*),
       min(t.enqueued_at),
       max(greatest(t.enqueued_at, t.claimed_at, t.completed_at, t.failed_at, t.dead_at, t.cancelled_at)),
       (select task_type from queues.task r where r.task_id = w.workflow_id)
from w
join lateral (
    select status, enqueued_at, claimed_at, completed_at, failed_at, dead_at, cancelled_at
    from queues.task where task_id = w.workflow_id and workflow_id is null
    union all
    select t.status, t.enqueued_at, t.claimed_at, t.completed_at, t.failed_at, t.dead_at, t.cancelled_at
    from queues.workflow_task m join queues.task t on t.task_id = m.task_id
    where m.workflow_id = w.workflow_id) t on true
group by w.workflow_id, t.status
order by w.workflow_id desc`

// workflowsPage lists the newest workflows, 50 a page (?before=ID for older ones).
func (h *Handler) workflowsPage(w http.ResponseWriter, r *http.Request) {
	d := workflowsData{Limit: workflowsShown}
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			h.fail(w, r, badRequestf("before must be a workflow id (a positive whole number), not %q", truncate(40, v)))
			return
		}
		d.Before = n
	}
	before := d.Before
	if before == 0 {
		before = 1<<63 - 1
	}
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, workflowsSQL, before, workflowsShown+1)
		if err != nil {
			return err
		}
		counts := map[int64]map[taskorch.Status]int64{}
		var id, n int64
		var status string
		var started, last time.Time
		var rootType *string
		_, err = pgx.ForEachRow(rows, []any{&id, &status, &n, &started, &last, &rootType}, func() error {
			if len(d.Workflows) == 0 || d.Workflows[len(d.Workflows)-1].ID != id {
				d.Workflows = append(d.Workflows, workflowRow{ID: id, RootType: derefString(rootType), Started: started, LastChange: last})
				counts[id] = map[taskorch.Status]int64{}
			}
			wf := &d.Workflows[len(d.Workflows)-1]
			wf.Tasks += n
			counts[id][taskorch.Status(status)] += n
			if started.Before(wf.Started) {
				wf.Started = started
			}
			if last.After(wf.LastChange) {
				wf.LastChange = last
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := range d.Workflows {
			for _, s := range taskorch.Statuses {
				if c := counts[d.Workflows[i].ID][s]; c > 0 {
					d.Workflows[i].Counts = append(d.Workflows[i].Counts, statusCount{Status: s, N: c})
				}
			}
		}
		return nil
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(d.Workflows) > workflowsShown {
		d.Workflows = d.Workflows[:workflowsShown]
		d.Older = d.Workflows[workflowsShown-1].ID
	}
	h.render(w, r, http.StatusOK, "workflows", "Workflows", "workflows", d)
}

// maxGraphNodes bounds the nodes a workflow's page draws: the first ones by id (parents come
// before their children, so every node drawn has its parents of the workflow drawn too).
const maxGraphNodes = 1000

// graphCountCap bounds the count of a workflow's tasks (Client.Workflow reads at most 100,000).
const graphCountCap = 100_000

// wfNode is a task of a workflow as read for its graph.
type wfNode struct {
	ID         int64
	Type       string
	Status     taskorch.Status
	Attempt    int
	Parents    []int64
	Workflow   *int64 // its workflow_id: NULL on a root
	LastError  *string
	EnqueuedAt time.Time
	Function   *string // a db_function task's function (payload ->> 'db_function'), else nil
	External   bool    // a parent from another workflow, drawn for its edge
}

// workflowNodesSQL reads a workflow's root and its first $2 other tasks by id.
const workflowNodesSQL = `select task_id, task_type, status::text, attempt, after_ids, workflow_id, last_error, enqueued_at,
       case when task_type = 'db_function' then left(payload ->> 'db_function', 130) end
from queues.task
where task_id = $1 and workflow_id is null
union all
(select t.task_id, t.task_type, t.status::text, t.attempt, t.after_ids, t.workflow_id, t.last_error, t.enqueued_at,
       case when t.task_type = 'db_function' then left(t.payload ->> 'db_function', 130) end
 from queues.workflow_task w
 join queues.task t on t.task_id = w.task_id
 where w.workflow_id = $1
 order by w.task_id
 limit $2)
order by task_id`

// externalParentsSQL reads the parents of drawn tasks that are not of the workflow.
const externalParentsSQL = `select task_id, task_type, status::text, attempt, after_ids, workflow_id, last_error, enqueued_at,
       case when task_type = 'db_function' then left(payload ->> 'db_function', 130) end
from queues.task
where task_id = any($1)
order by task_id`

type workflowData struct {
	ID        int64
	Tasks     int64 // how many tasks it has (at most graphCountCap, then TasksMore)
	TasksMore bool
	Drawn     int  // how many of its tasks are drawn
	Capped    bool // not all of them
	Graph     workflowGraph
	Retryable []wfNode // failed and dead nodes, which an operator may retry
	// Cancellable counts the drawn nodes Cancel workflow cancels (waiting, pending, running,
	// failed, dead); the form shows when there is one.
	Cancellable int64
	Counts      []statusCount
	Missing     []int64 // parents named by drawn tasks that no longer exist (retention)
	Return      string
	Statuses    []taskorch.Status
	Started     time.Time // the first enqueue of a task drawn
}

// workflowPage draws one workflow: its graph (nodes in layers by depth, coloured by status,
// each a link to its task; edges from each parent to its child), its counts by status, and the
// operator's actions (Cancel workflow; Retry on a failed or dead node).
func (h *Handler) workflowPage(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		h.fail(w, r, badRequestf("a workflow id is a positive whole number (its first task's id), not %q", truncate(40, raw)))
		return
	}
	d := workflowData{ID: id, Return: h.path(r.URL.RequestURI()), Statuses: taskorch.Statuses}
	var nodes []wfNode
	err = h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if nodes, err = readWorkflowNodes(ctx, tx, workflowNodesSQL, id, maxGraphNodes-1); err != nil {
			return err
		}
		if len(nodes) == 0 || len(nodes) == 1 && nodes[0].ID == id { // no task took its id: no workflow (as Client.Workflow says)
			return notFoundf("no workflow %d (a workflow's id is its first task's; a task without parents or children is in none, and retention may have pruned it)", id)
		}
		if err := tx.QueryRow(ctx, `select count(*) from (select from queues.workflow_task where workflow_id = $1 limit $2) t`,
			id, graphCountCap+1).Scan(&d.Tasks); err != nil {
			return err
		}
		if nodes[0].ID == id { // the root, unless retention pruned it
			d.Tasks++
		}
		if d.Tasks > graphCountCap {
			d.Tasks, d.TasksMore = graphCountCap, true
		}
		// Parents of drawn tasks that are not drawn: of another workflow (drawn too, marked), or
		// deleted since.
		in := make(map[int64]bool, len(nodes))
		for _, n := range nodes {
			in[n.ID] = true
		}
		var outside []int64
		listed := map[int64]bool{}
		for _, n := range nodes {
			for _, p := range n.Parents {
				if !in[p] && !listed[p] {
					listed[p] = true
					outside = append(outside, p)
				}
			}
		}
		if len(outside) == 0 {
			return nil
		}
		ext, err := readWorkflowNodes(ctx, tx, externalParentsSQL, outside)
		if err != nil {
			return err
		}
		for i := range ext {
			ext[i].External = true
			in[ext[i].ID] = true
		}
		for _, p := range outside {
			if !in[p] {
				d.Missing = append(d.Missing, p)
			}
		}
		nodes = append(ext, nodes...)
		return nil
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	counts := map[taskorch.Status]int64{}
	for _, n := range nodes {
		if n.External {
			continue
		}
		d.Drawn++
		counts[n.Status]++
		switch n.Status {
		case taskorch.StatusFailed, taskorch.StatusDead:
			d.Retryable = append(d.Retryable, n)
			d.Cancellable++
		case taskorch.StatusWaiting, taskorch.StatusPending, taskorch.StatusRunning:
			d.Cancellable++
		}
		if d.Started.IsZero() || n.EnqueuedAt.Before(d.Started) {
			d.Started = n.EnqueuedAt
		}
	}
	for _, s := range taskorch.Statuses {
		if counts[s] > 0 {
			d.Counts = append(d.Counts, statusCount{Status: s, N: counts[s]})
		}
	}
	d.Capped = d.TasksMore || int64(d.Drawn) < d.Tasks
	d.Graph = layoutWorkflow(h.cfg.Prefix, nodes)
	h.render(w, r, http.StatusOK, "workflow", "Workflow "+strconv.FormatInt(id, 10), "workflows", d)
}

func readWorkflowNodes(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]wfNode, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var out []wfNode
	var n wfNode
	var status string
	_, err = pgx.ForEachRow(rows, []any{&n.ID, &n.Type, &status, &n.Attempt, &n.Parents, &n.Workflow, &n.LastError, &n.EnqueuedAt, &n.Function}, func() error {
		n.Status = taskorch.Status(status)
		out = append(out, n)
		n = wfNode{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("workflow nodes: %w", err)
	}
	return out, nil
}
