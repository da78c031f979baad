package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
)

type taskDetail struct {
	Task      *taskorch.Task
	History   *taskorch.History
	Timeline  leaseTimeline
	Processes []processLink
	Workflow  int64  // the workflow it belongs to (its own id when it is one's first task), 0 for none
	HeldBy    string // why a pending task of a limited type waits (limits.go)
	Return    string
	CanRetry  bool
	CanCancel bool
	CanDelete bool // finished: only finished tasks are deleted
}

// processLink names the process instance a task belongs to.
type processLink struct {
	Process string // schema.name
	ID      int64  // the instance (root task) id
	Via     string // the payload key that says so
}

func (h *Handler) taskPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.fail(w, r, notFoundf("no task %q", truncate(40, r.PathValue("id"))))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	d := taskDetail{Return: h.path(r.URL.RequestURI())}
	if d.Task, err = h.client.Get(ctx, id); err != nil {
		if errors.Is(err, taskorch.ErrNotFound) {
			err = notFoundf("no task %d (it may have been pruned by retention)", id)
		}
		h.fail(w, r, err)
		return
	}
	if d.History, err = h.client.History(ctx, id); err != nil {
		h.fail(w, r, err)
		return
	}
	switch d.Task.Status {
	case taskorch.StatusDead, taskorch.StatusFailed, taskorch.StatusCancelled, taskorch.StatusPending:
		d.CanRetry = true
	}
	switch d.Task.Status {
	case taskorch.StatusWaiting, taskorch.StatusPending, taskorch.StatusRunning, taskorch.StatusFailed, taskorch.StatusDead:
		d.CanCancel = true
	}
	switch d.Task.Status {
	case taskorch.StatusCompleted, taskorch.StatusFailed, taskorch.StatusDead, taskorch.StatusCancelled:
		d.CanDelete = true
	}
	d.Timeline = newLeaseTimeline(d.Task, d.History, time.Now())
	err = h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		if d.Processes, err = h.processLinks(ctx, tx, d.Task.Payload); err != nil {
			return err
		}
		if d.HeldBy, err = h.heldBy(ctx, tx, d.Task); err != nil {
			return err
		}
		d.Workflow, err = workflowOfTask(ctx, tx, d.Task)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "task", "Task "+strconv.FormatInt(id, 10), "tasks", d)
}

// workflowOfTask is the workflow a task belongs to: its workflow_id, or its own id when it has
// none but some task took it (it is a workflow's first task); 0 for a task in no workflow.
func workflowOfTask(ctx context.Context, tx pgx.Tx, t *taskorch.Task) (int64, error) {
	if t.WorkflowID != nil {
		return *t.WorkflowID, nil
	}
	var first bool
	err := tx.QueryRow(ctx, `select exists (select from queues.workflow_task where workflow_id = $1)`, t.ID).Scan(&first)
	if err != nil || !first {
		return 0, err
	}
	return t.ID, nil
}

// processLinks finds the process instances a payload names: a key <name>_task_id is the
// instance itself (a supervisor's payload), <name>_attempt_id one of its attempts (a channel
// task's), looked up in the attempt table.
func (h *Handler) processLinks(ctx context.Context, tx pgx.Tx, payload json.RawMessage) ([]processLink, error) {
	var m map[string]any
	if json.Unmarshal(payload, &m) != nil || len(m) == 0 {
		return nil, nil
	}
	ps, err := h.processes(ctx, tx)
	if err != nil {
		return nil, err
	}
	var out []processLink
	for _, p := range ps {
		if v, ok := jsonInt(m[p.taskPK()]); ok {
			out = append(out, processLink{Process: p.ID(), ID: v, Via: p.taskPK()})
			continue
		}
		v, ok := jsonInt(m[p.attemptPK()])
		if !ok || p.Attempt == nil {
			continue
		}
		var root int64
		err := tx.QueryRow(ctx, "select "+col(p.taskPK())+"::bigint from "+p.ident(p.Attempt.Table)+
			" where "+col(p.attemptPK())+" = $1", v).Scan(&root)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, processLink{Process: p.ID(), ID: root, Via: p.attemptPK() + " " + strconv.FormatInt(v, 10)})
	}
	return out, nil
}

// jsonInt reads an id from a decoded JSON value: a whole number or a string of digits.
func jsonInt(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		if x > 0 && x == float64(int64(x)) {
			return int64(x), true
		}
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil && n > 0
	}
	return 0, false
}

// leaseTimeline draws a task's leases as bars on a time axis (SVG, template "timeline"): one
// row per lease, from its grant to the event that ended it (or now, or its expiry).
type leaseTimeline struct {
	Width, Height int
	Rows          []timelineRow
	Start, End    time.Time
	Ticks         []chartTick
}

type timelineRow struct {
	Y       float64
	X, W    float64
	Class   string // the outcome: completed, retry, failed, expired, running, other
	Label   string
	Tooltip string
}

const (
	timelineWidth = 720
	timelineLeft  = 8
	timelineRight = 8
	timelineRowH  = 26
)

func newLeaseTimeline(t *taskorch.Task, h *taskorch.History, now time.Time) leaseTimeline {
	tl := leaseTimeline{Width: timelineWidth}
	if len(h.Leases) == 0 {
		return tl
	}
	type span struct {
		from, to time.Time
		outcome  string
		l        taskorch.Lease
	}
	spans := make([]span, 0, len(h.Leases))
	for _, l := range h.Leases {
		s := span{from: l.LeasedAt, l: l}
		for _, e := range h.Events {
			if e.LeaseID == nil || *e.LeaseID != l.ID || e.Event == "claimed" || e.OccurredAt.Before(l.LeasedAt) {
				continue
			}
			s.to, s.outcome = e.OccurredAt, e.Event
			break
		}
		if s.outcome == "" {
			if t.Status == taskorch.StatusRunning && t.LeaseID != nil && *t.LeaseID == l.ID {
				s.to, s.outcome = now, "running"
			} else {
				s.to, s.outcome = l.ExpiresAt, "unknown"
			}
		}
		spans = append(spans, s)
	}
	tl.Start, tl.End = spans[0].from, spans[0].to
	for _, s := range spans {
		if s.from.Before(tl.Start) {
			tl.Start = s.from
		}
		if s.to.After(tl.End) {
			tl.End = s.to
		}
	}
	total := tl.End.Sub(tl.Start)
	if total <= 0 {
		total = time.Millisecond
	}
	plotW := float64(timelineWidth - timelineLeft - timelineRight)
	for i, s := range spans {
		x := timelineLeft + plotW*float64(s.from.Sub(tl.Start))/float64(total)
		w := max(plotW*float64(s.to.Sub(s.from))/float64(total), 3)
		worker := ""
		if s.l.WorkerID != nil {
			worker = *s.l.WorkerID
		}
		tl.Rows = append(tl.Rows, timelineRow{
			Y: float64(i*timelineRowH + 4), X: x, W: w, Class: timelineClass(s.outcome),
			Label: "attempt " + strconv.Itoa(s.l.Attempt) + " · lease " + strconv.FormatInt(s.l.ID, 10) + " · " +
				s.outcome + " after " + shortDuration(s.to.Sub(s.from)) + " · " + worker,
			Tooltip: "worker " + worker + ", from " + formatTime(s.from) + " to " + formatTime(s.to) + " UTC",
		})
	}
	tl.Height = len(spans)*timelineRowH + 22
	for i, f := range []float64{0, 0.5, 1} {
		tl.Ticks = append(tl.Ticks, chartTick{
			X: timelineLeft + plotW*f, Y: float64(tl.Height - 4),
			Label: "+" + shortDuration(time.Duration(f*float64(total))), Anchor: []string{"start", "middle", "end"}[i],
		})
	}
	return tl
}

func timelineClass(outcome string) string {
	switch outcome {
	case "completed":
		return "tl-ok"
	case "retry_scheduled", "snoozed", "released":
		return "tl-retry"
	case "failed", "dead":
		return "tl-bad"
	case "lease_expired", "recovered", "unknown":
		return "tl-expired"
	case "running":
		return "tl-running"
	default:
		return "tl-other"
	}
}
