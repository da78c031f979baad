package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
)

// Task is a task as the API answers it. Type, Payload, Priority, IdempotencyKey, ParentIDs
// and WorkflowID are there when the role may select queues.task; a role that reads through
// queues.get_task_status (an application's role: its own tasks only) gets the rest.
type Task struct {
	TaskID         int64           `json:"task_id"`
	Type           *string         `json:"type,omitempty"`
	Status         string          `json:"status"`
	Finished       bool            `json:"finished"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Priority       *int            `json:"priority,omitempty"`
	IdempotencyKey *string         `json:"idempotency_key,omitempty"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	Result         json.RawMessage `json:"result,omitempty"`
	LastError      *string         `json:"last_error,omitempty"`
	EnqueuedAt     time.Time       `json:"enqueued_at"`
	RunAt          time.Time       `json:"run_at"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
	ParentIDs      []int64         `json:"parent_ids,omitempty"`
	WorkflowID     *int64          `json:"workflow_id,omitempty"`
}

// fromTask is the API's view of a client task.
func fromTask(t *taskorch.Task) *Task {
	typ, prio := t.Type, t.Priority
	out := &Task{
		TaskID: t.ID, Type: &typ, Status: string(t.Status), Finished: t.Status.Finished(),
		Payload: t.Payload, Priority: &prio, IdempotencyKey: t.IdempotencyKey,
		Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Result: t.Result, LastError: t.LastError,
		EnqueuedAt: t.EnqueuedAt, RunAt: t.RunAt, ParentIDs: t.ParentIDs, WorkflowID: t.WorkflowID,
	}
	switch t.Status { // the time of the status it has: a retried task may hold older ones
	case taskorch.StatusCompleted:
		out.FinishedAt = t.CompletedAt
	case taskorch.StatusFailed:
		out.FinishedAt = t.FailedAt
	case taskorch.StatusDead:
		out.FinishedAt = t.DeadAt
	case taskorch.StatusCancelled:
		out.FinishedAt = t.CancelledAt
	}
	return out
}

// maxBody bounds a request body: the client's payload bound (1 MiB) and room for the rest.
const maxBody = 2 << 20

// decodeBody reads exactly one JSON object into v, refusing unknown fields and trailing data.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return badRequest("the body is over %d bytes", maxBody)
		}
		return badRequest("could not read the body")
	}
	if len(bytes.TrimSpace(b)) == 0 || bytes.TrimSpace(b)[0] != '{' {
		return badRequest("the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("malformed JSON body: %s", jsonProblem(err))
	}
	if dec.More() {
		return badRequest("malformed JSON body: data after the object")
	}
	return nil
}

// jsonProblem says what encoding/json found wrong, without Go type names where it can.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("field %q must be %s, got a JSON %s", typeErr.Field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonTypeName(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"):
		return "an integer"
	case kind == "string":
		return "a string"
	case kind == "slice":
		return "an array"
	case kind == "struct":
		return "an RFC 3339 time or an object"
	}
	return "of another type"
}

// EnqueueRequest is POST /v1/tasks's body (openapi.yaml's EnqueueRequest).
type EnqueueRequest struct {
	Type            string          `json:"type"`
	Payload         json.RawMessage `json:"payload"`
	IdempotencyKey  string          `json:"idempotency_key"`
	RunAt           *string         `json:"run_at"`
	Priority        *int            `json:"priority"`
	MaxAttempts     int             `json:"max_attempts"`
	After           []int64         `json:"after"`
	OnParentFailure string          `json:"on_parent_failure"`
}

// EnqueueResponse is POST /v1/tasks's answer.
type EnqueueResponse struct {
	TaskID    int64 `json:"task_id"`
	Duplicate bool  `json:"duplicate"`
}

func (h *Handler) enqueue(w http.ResponseWriter, r *http.Request, role string) {
	var req EnqueueRequest
	if err := decodeBody(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if req.Type == "" {
		h.fail(w, r, badRequest("type is required"))
		return
	}
	if req.After != nil && len(req.After) == 0 {
		h.fail(w, r, badRequest("after must name at least one task when given"))
		return
	}
	opts := &taskorch.EnqueueOpts{
		Priority: req.Priority, IdempotencyKey: req.IdempotencyKey, MaxAttempts: req.MaxAttempts,
		After: req.After, OnParentFailure: taskorch.ParentFailurePolicy(req.OnParentFailure),
	}
	if req.RunAt != nil {
		at, err := time.Parse(time.RFC3339Nano, *req.RunAt)
		if err != nil {
			h.fail(w, r, badRequest("run_at must be an RFC 3339 time (2026-11-27T10:00:00Z), got %q", *req.RunAt))
			return
		}
		if at.IsZero() {
			h.fail(w, r, badRequest("run_at must be a time after the year 1"))
			return
		}
		opts.ScheduledAt = at
	}
	if req.MaxAttempts < 0 {
		h.fail(w, r, badRequest("max_attempts must be at least 1, got %d", req.MaxAttempts))
		return
	}
	var res *taskorch.EnqueueResult
	err := h.inRole(r.Context(), role, func(ctx context.Context, tx pgx.Tx) (err error) {
		res, err = h.client.EnqueueTx(ctx, tx, taskorch.RawArgs{Type: req.Type, Payload: req.Payload}, opts)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, EnqueueResponse{TaskID: res.TaskID, Duplicate: res.Duplicate})
}

// taskID reads the {id} path value: a positive integer.
func taskID(r *http.Request) (int64, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("task id must be a positive integer, got %q", s)
	}
	return id, nil
}

// readTask reads one task as the transaction's role: the whole row when the role may select
// queues.task, else through queues.get_task_status (the tasks its role enqueued). A task the
// role may not see is ErrNotFound, as one that does not exist.
func (h *Handler) readTask(ctx context.Context, tx pgx.Tx, id int64) (*Task, error) {
	var whole bool
	if err := tx.QueryRow(ctx, `select has_schema_privilege('queues', 'usage') and has_table_privilege('queues.task', 'select')`).
		Scan(&whole); err != nil {
		return nil, err
	}
	if whole {
		t, err := h.client.GetTx(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		return fromTask(t), nil
	}
	t := &Task{}
	var result []byte
	err := tx.QueryRow(ctx, `select task_id, status::text, attempt, max_attempts, result, last_error, enqueued_at, run_at, finished_at
		from queues.get_task_status($1)`, id).
		Scan(&t.TaskID, &t.Status, &t.Attempt, &t.MaxAttempts, &result, &t.LastError, &t.EnqueuedAt, &t.RunAt, &t.FinishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("task %d: %w", id, taskorch.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	t.Result = result
	t.Finished = taskorch.Status(t.Status).Finished()
	return t, nil
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, role string) {
	id, err := taskID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var t *Task
	err = h.inRole(r.Context(), role, func(ctx context.Context, tx pgx.Tx) (err error) {
		t, err = h.readTask(ctx, tx, id)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// TaskList is GET /v1/tasks's answer.
type TaskList struct {
	Tasks []*Task `json:"tasks"`
	Next  *int64  `json:"next"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, role string) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "type", "status", "limit", "before":
		default:
			h.fail(w, r, badRequest("unknown query parameter %q (type, status, limit, before)", k))
			return
		}
	}
	p := &taskorch.ListParams{Types: q["type"]}
	for _, s := range q["status"] {
		p.Statuses = append(p.Statuses, taskorch.Status(s))
	}
	for _, n := range []struct {
		name string
		dst  func(int64)
	}{
		{"limit", func(v int64) { p.Limit = int(v) }},
		{"before", func(v int64) { p.Before = v }},
	} {
		if s := q.Get(n.name); s != "" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v <= 0 {
				h.fail(w, r, badRequest("%s must be a positive integer, got %q", n.name, s))
				return
			}
			n.dst(v)
		}
	}
	if p.Limit > 10000 {
		h.fail(w, r, badRequest("limit must be between 1 and 10000, got %d", p.Limit))
		return
	}
	var l *taskorch.TaskList
	err := h.inRole(r.Context(), role, func(ctx context.Context, tx pgx.Tx) (err error) {
		l, err = h.client.ListTx(ctx, tx, p)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := TaskList{Tasks: make([]*Task, 0, len(l.Tasks))}
	for _, t := range l.Tasks {
		out.Tasks = append(out.Tasks, fromTask(t))
	}
	if l.Next != 0 {
		out.Next = &l.Next
	}
	writeJSON(w, http.StatusOK, out)
}

// defaultWait is a wait's timeout when the request gives none.
const defaultWait = 30 * time.Second

// wait answers once the task has finished or the timeout passed, with the task as the role
// sees it (Finished says which). The role's right to see the task is checked first; the wake-up
// is the Go client's Wait (LISTEN/NOTIFY through the API's own login role), and the task is
// read again as the role.
func (h *Handler) wait(w http.ResponseWriter, r *http.Request, role string) {
	id, err := taskID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	timeout := min(defaultWait, h.cfg.MaxWait)
	for k := range r.URL.Query() {
		if k != "timeout" {
			h.fail(w, r, badRequest("unknown query parameter %q (timeout)", k))
			return
		}
	}
	if s := r.URL.Query().Get("timeout"); s != "" {
		secs, err := strconv.ParseFloat(s, 64)
		if err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) {
			h.fail(w, r, badRequest("timeout must be a number of seconds, 0 or more, got %q", s))
			return
		}
		timeout = h.cfg.MaxWait
		if secs < h.cfg.MaxWait.Seconds() {
			timeout = time.Duration(secs * float64(time.Second))
		}
	}
	var t *Task
	read := func() error {
		return h.inRole(r.Context(), role, func(ctx context.Context, tx pgx.Tx) (err error) {
			t, err = h.readTask(ctx, tx, id)
			return err
		})
	}
	if err := read(); err != nil {
		h.fail(w, r, err)
		return
	}
	if !t.Finished && timeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		_, err := h.client.Wait(ctx, id)
		cancel()
		switch {
		case err == nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, taskorch.ErrNotFound):
			// Finished, timed out, or deleted meanwhile: read it again as the role.
		case r.Context().Err() != nil:
			return // the caller went away
		case errors.Is(err, taskorch.ErrClientClosed):
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the API is shutting down: wait again")
			return
		default:
			h.internal(w, r, fmt.Errorf("wait (as the API's login role, which needs execute on queues.watch_task and select on queues.task): %w", err))
			return
		}
		if err := read(); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, t)
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request, role string) {
	h.control(w, r, role, h.client.CancelTx)
}

func (h *Handler) retry(w http.ResponseWriter, r *http.Request, role string) {
	h.control(w, r, role, h.client.RetryTx)
}

// control runs Client.CancelTx or RetryTx (queues.cancel_task, queues.retry_task) as the role.
func (h *Handler) control(w http.ResponseWriter, r *http.Request, role string,
	op func(ctx context.Context, tx pgx.Tx, id int64) (*taskorch.Task, error)) {
	id, err := taskID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := emptyBody(r); err != nil {
		h.fail(w, r, err)
		return
	}
	var t *taskorch.Task
	err = h.inRole(r.Context(), role, func(ctx context.Context, tx pgx.Tx) (err error) {
		t, err = op(ctx, tx, id)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, fromTask(t))
}

// emptyBody accepts no body, or an empty JSON object (what generated clients send).
func emptyBody(r *http.Request) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 1024))
	if err != nil {
		return badRequest("this route takes no body")
	}
	if s := strings.Join(strings.Fields(string(b)), ""); s != "" && s != "{}" {
		return badRequest("this route takes no body (or {})")
	}
	return nil
}

// SignalRequest is POST /v1/signals's body.
type SignalRequest struct {
	Name    string          `json:"name"`
	Key     string          `json:"key"`
	Payload json.RawMessage `json:"payload"`
}

// SignalResponse is POST /v1/signals's answer.
type SignalResponse struct {
	Recorded bool `json:"recorded"`
}

func (h *Handler) signal(w http.ResponseWriter, r *http.Request, role string) {
	var req SignalRequest
	if err := decodeBody(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	var payload any
	if len(req.Payload) > 0 {
		payload = req.Payload
	}
	var recorded bool
	err := h.inRole(r.Context(), role, func(ctx context.Context, tx pgx.Tx) (err error) {
		recorded, err = h.client.SignalTx(ctx, tx, req.Name, req.Key, payload)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, SignalResponse{Recorded: recorded})
}
