package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// processCountCap bounds each count of the processes page.
const processCountCap = 10_000

// processSummary is a process with its counts (each capped at processCountCap; -1: the
// process has no such table).
type processSummary struct {
	process
	Roots, Attempts, AttemptsOK, AttemptsFailed, TasksOK, TasksFailed, TasksTimedOut int64
	Cap                                                                              int64
}

// cappedCount returns a count of a table's rows capped at $1, or -1 when it has no table.
func cappedCount(p process, r *relation) string {
	if r == nil {
		return "-1::bigint"
	}
	return "(select count(*) from (select from " + p.ident(r.Table) + " limit $1) x)"
}

func (h *Handler) processesPage(w http.ResponseWriter, r *http.Request) {
	var out []processSummary
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		ps, err := h.processes(ctx, tx)
		if err != nil {
			return err
		}
		for _, p := range ps {
			s := processSummary{process: p, Cap: processCountCap}
			if p.Root.Readable {
				root := p.Root
				q := "select " + strings.Join([]string{
					cappedCount(p, &root), cappedCount(p, p.Attempt), cappedCount(p, p.AttemptOK),
					cappedCount(p, p.AttemptFailed), cappedCount(p, p.TaskOK), cappedCount(p, p.TaskFailed),
					cappedCount(p, p.TaskTimedOut),
				}, ", ")
				if err := tx.QueryRow(ctx, q, processCountCap).Scan(&s.Roots, &s.Attempts, &s.AttemptsOK,
					&s.AttemptsFailed, &s.TasksOK, &s.TasksFailed, &s.TasksTimedOut); err != nil {
					return err
				}
			}
			out = append(out, s)
		}
		return nil
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "processes", "Processes", "processes", out)
}

// processRoot is one instance of a process: its root row and what its facts say.
type processRoot struct {
	ID             int64
	Row            json.RawMessage
	CreatedAt      *time.Time
	Attempts       int64 // -1: no attempt table
	AttemptsOK     int64
	AttemptsFailed int64
	TaskOK         bool
	TaskFailed     json.RawMessage
	TaskTimedOut   json.RawMessage // the timed_out fact of a wait step's signal that did not come
	LastError      *string
}

// State summarises the facts: timed_out, succeeded, failed or in progress. A timed-out
// instance's attempt succeeded: its timed_out fact decides first.
func (p processRoot) State() string {
	switch {
	case len(p.TaskTimedOut) > 0 && string(p.TaskTimedOut) != "null":
		return "timed_out"
	case p.TaskOK || p.AttemptsOK > 0:
		return "succeeded"
	case len(p.TaskFailed) > 0 && string(p.TaskFailed) != "null":
		return "failed"
	default:
		return "in progress"
	}
}

// FailureMessage is the error_message of the process's failed fact, or the reason of its
// timed_out fact, if any.
func (p processRoot) FailureMessage() string {
	if p.State() == "timed_out" {
		return jsonString(p.TaskTimedOut, "reason")
	}
	return jsonString(p.TaskFailed, "error_message")
}

type processPageData struct {
	Process processSummary
	Roots   []processRoot
	Older   template.URL
	Newer   template.URL
}

// rootsSQL reads a page of a process's root rows, newest first, with their facts. Table and
// column names are the catalog's, quoted.
func rootsSQL(p process, before, after bool) string {
	pk := col(p.taskPK())
	att, aid := "", col(p.attemptPK())
	if p.Attempt != nil {
		att = p.ident(p.Attempt.Table)
	}
	sel := []string{"r." + pk, "to_jsonb(r) - $2::text"}
	if p.Root.has("created_at") {
		sel = append(sel, "r.created_at::timestamptz")
	} else {
		sel = append(sel, "null::timestamptz")
	}
	if p.Attempt != nil {
		sel = append(sel, "(select count(*) from "+att+" a where a."+pk+" = r."+pk+")")
	} else {
		sel = append(sel, "-1::bigint")
	}
	factCount := func(f *relation) string {
		if f == nil {
			return "0::bigint"
		}
		return "(select count(*) from " + att + " a join " + p.ident(f.Table) + " f on f." + aid + " = a." + aid +
			" where a." + pk + " = r." + pk + ")"
	}
	sel = append(sel, factCount(p.AttemptOK), factCount(p.AttemptFailed))
	if p.TaskOK != nil {
		sel = append(sel, "exists (select from "+p.ident(p.TaskOK.Table)+" x where x."+pk+" = r."+pk+")")
	} else {
		sel = append(sel, "false")
	}
	if p.TaskFailed != nil {
		sel = append(sel, "(select to_jsonb(x) from "+p.ident(p.TaskFailed.Table)+" x where x."+pk+" = r."+pk+" limit 1)")
	} else {
		sel = append(sel, "null::jsonb")
	}
	if p.TaskTimedOut != nil {
		sel = append(sel, "(select to_jsonb(x) from "+p.ident(p.TaskTimedOut.Table)+" x where x."+pk+" = r."+pk+" limit 1)")
	} else {
		sel = append(sel, "null::jsonb")
	}
	if p.AttemptFailed.has("error_message") {
		sel = append(sel, "(select f.error_message::text from "+att+" a join "+p.ident(p.AttemptFailed.Table)+" f on f."+aid+" = a."+aid+
			" where a."+pk+" = r."+pk+" order by a."+aid+" desc limit 1)")
	} else {
		sel = append(sel, "null::text")
	}
	q := "select " + strings.Join(sel, ",\n       ") + "\nfrom " + p.ident(p.Root.Table) + " r"
	order := "desc"
	switch {
	case after:
		q += "\nwhere r." + pk + " > $1"
		order = "asc"
	case before:
		q += "\nwhere r." + pk + " < $1"
	default:
		q += "\nwhere $1::bigint = 0"
	}
	return q + "\norder by r." + pk + " " + order + "\nlimit $3"
}

const processPageSize = 50

func (h *Handler) processPage(w http.ResponseWriter, r *http.Request) {
	var d processPageData
	q := r.URL.Query()
	var before, after int64
	for name, dst := range map[string]*int64{"before": &before, "after": &after} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				h.fail(w, r, badRequestf("%s must be an id", name))
				return
			}
			*dst = n
		}
	}
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		p, err := h.findProcess(ctx, tx, r.PathValue("process"))
		if err != nil {
			return err
		}
		d.Process = processSummary{process: p}
		cursor := max(before, after)
		rows, err := tx.Query(ctx, rootsSQL(p, before > 0, after > 0), cursor, p.taskPK(), processPageSize+1)
		if err != nil {
			return err
		}
		d.Roots, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (processRoot, error) {
			var x processRoot
			err := r.Scan(&x.ID, &x.Row, &x.CreatedAt, &x.Attempts, &x.AttemptsOK, &x.AttemptsFailed, &x.TaskOK, &x.TaskFailed, &x.TaskTimedOut, &x.LastError)
			return x, err
		})
		if err != nil {
			return err
		}
		more := len(d.Roots) > processPageSize
		if more {
			d.Roots = d.Roots[:processPageSize]
		}
		if after > 0 {
			for i, j := 0, len(d.Roots)-1; i < j; i, j = i+1, j-1 {
				d.Roots[i], d.Roots[j] = d.Roots[j], d.Roots[i]
			}
		}
		if n := len(d.Roots); n > 0 {
			if (after == 0 && more) || after > 0 {
				d.Older = queryURL(url.Values{"before": {strconv.FormatInt(d.Roots[n-1].ID, 10)}})
			}
			if before > 0 || (after > 0 && more) {
				d.Newer = queryURL(url.Values{"after": {strconv.FormatInt(d.Roots[0].ID, 10)}})
			}
		}
		return nil
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "process", d.Process.ID(), "processes", d)
}

// processAttempt is one attempt of a process instance with its facts.
type processAttempt struct {
	ID        int64
	Row       json.RawMessage
	Succeeded json.RawMessage
	Failed    json.RawMessage
}

// Outcome is succeeded, failed or outstanding.
func (a processAttempt) Outcome() string {
	switch {
	case len(a.Succeeded) > 0 && string(a.Succeeded) != "null":
		return "succeeded"
	case len(a.Failed) > 0 && string(a.Failed) != "null":
		return "failed"
	default:
		return "outstanding"
	}
}

// CreatedAt is the attempt's created_at, if it has one, in UTC.
func (a processAttempt) CreatedAt() string {
	s := jsonString(a.Row, "created_at")
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return formatTime(t)
	}
	return s
}

// FailureMessage is the failed fact's error_message.
func (a processAttempt) FailureMessage() string { return jsonString(a.Failed, "error_message") }

// Permanent reports whether the attempt failed permanently: its failed fact's error_class
// (docs/processes.md, "Permanent failures").
func (a processAttempt) Permanent() bool { return jsonString(a.Failed, "error_class") == "permanent" }

// TaskID is the queue task the attempt names in a task_id column, if it has one.
func (a processAttempt) TaskID() string { return jsonString(a.Row, "task_id") }

// relatedTask is a queue task whose payload names the instance or one of its attempts.
type relatedTask struct {
	ID          int64
	Type        string
	Status      string
	EnqueuedAt  time.Time
	Attempt     int
	LastError   *string
	CallFailure *string // a channel task completed although its call failed
	Function    *string
}

type processInstanceData struct {
	Process    process
	ID         int64
	Row        json.RawMessage
	Attempts   []processAttempt
	TaskOK     json.RawMessage
	TaskFailed json.RawMessage
	// TaskTimedOut is the timed_out fact of a wait step's signal that did not come in time.
	TaskTimedOut json.RawMessage
	Tasks        []relatedTask
	TasksNote    string
	Keys         []string      // the payload keys searched for
	State        instanceState // what the instances view says, when the process is registered
	Retry        retryState    // retry by hand: whether it is offered, and the restarts so far
}

// Permanent reports that the instance failed at once on a permanent failure: the instances
// view says failed and its last attempt failed permanently.
func (d processInstanceData) Permanent() bool {
	n := len(d.Attempts)
	return d.State.Known && d.State.Instance.State == "failed" && n > 0 && d.Attempts[n-1].Permanent()
}

// relatedTasksTimeout bounds the search of queue tasks by payload: without an index on the
// payload it reads the task table.
const relatedTasksTimeout = 3 * time.Second

func (h *Handler) processInstancePage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.fail(w, r, notFoundf("no instance %q", truncate(40, r.PathValue("id"))))
		return
	}
	d := processInstanceData{ID: id}
	err = h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		p, err := h.findProcess(ctx, tx, r.PathValue("process"))
		if err != nil {
			return err
		}
		d.Process = p
		pk := col(p.taskPK())
		err = tx.QueryRow(ctx, "select to_jsonb(r) from "+p.ident(p.Root.Table)+" r where r."+pk+" = $1", id).Scan(&d.Row)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFoundf("%s has no instance %d", p.ID(), id)
		}
		if err != nil {
			return err
		}
		var attemptIDs []int64
		if p.Attempt != nil {
			aid := col(p.attemptPK())
			fact := func(f *relation) string {
				if f == nil {
					return "null::jsonb"
				}
				return "(select to_jsonb(f) from " + p.ident(f.Table) + " f where f." + aid + " = a." + aid + " limit 1)"
			}
			rows, err := tx.Query(ctx, "select a."+aid+", to_jsonb(a), "+fact(p.AttemptOK)+", "+fact(p.AttemptFailed)+
				" from "+p.ident(p.Attempt.Table)+" a where a."+pk+" = $1 order by a."+aid+" limit 500", id)
			if err != nil {
				return err
			}
			d.Attempts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (processAttempt, error) {
				var a processAttempt
				err := r.Scan(&a.ID, &a.Row, &a.Succeeded, &a.Failed)
				return a, err
			})
			if err != nil {
				return err
			}
			for _, a := range d.Attempts {
				attemptIDs = append(attemptIDs, a.ID)
			}
		}
		for _, f := range []struct {
			rel *relation
			dst *json.RawMessage
		}{{p.TaskOK, &d.TaskOK}, {p.TaskFailed, &d.TaskFailed}, {p.TaskTimedOut, &d.TaskTimedOut}} {
			if f.rel == nil {
				continue
			}
			// The newest run's fact first: a process retried by hand has one failed fact per run.
			err := tx.QueryRow(ctx, "select to_jsonb(x) from "+p.ident(f.rel.Table)+" x where x."+pk+
				" = $1 order by (to_jsonb(x) ->> 'run')::integer desc nulls last limit 1", id).Scan(f.dst)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if d.State, err = readInstanceState(ctx, tx, p.ID(), id); err != nil {
			return err
		}
		if d.State.Known {
			if d.Retry, err = readRetryState(ctx, tx, p.ID(), id, d.State.Instance.State); err != nil {
				return err
			}
			if len(d.Retry.Restarts) > 0 && d.State.Instance.State != "failed" {
				d.TaskFailed = nil // the failure of a restarted run: listed with the restarts
			}
		}
		return h.relatedTasks(ctx, tx, p, id, attemptIDs, &d)
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "process_instance", d.Process.ID()+" "+strconv.FormatInt(id, 10), "processes", d)
}

// relatedTasks finds the queue tasks whose payload carries the instance's id
// ({"<name>_task_id": id}: its supervisor runs) or one of its attempts' ids (the channel tasks
// the supervisor enqueued). It runs last in the page's transaction, under a shorter timeout:
// when it times out the page says so instead of failing.
func (h *Handler) relatedTasks(ctx context.Context, tx pgx.Tx, p process, id int64, attemptIDs []int64, d *processInstanceData) error {
	var docs []string
	add := func(key string, v int64) {
		for _, val := range []any{v, strconv.FormatInt(v, 10)} {
			b, _ := json.Marshal(map[string]any{key: val})
			docs = append(docs, string(b))
		}
	}
	add(p.taskPK(), id)
	d.Keys = append(d.Keys, p.taskPK())
	for _, a := range attemptIDs {
		add(p.attemptPK(), a)
	}
	if len(attemptIDs) > 0 {
		d.Keys = append(d.Keys, p.attemptPK())
	}
	if _, err := tx.Exec(ctx, "set local statement_timeout = "+strconv.FormatInt(relatedTasksTimeout.Milliseconds(), 10)); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `
		select task_id, task_type, status::text, enqueued_at, attempt, left(last_error, 200), call_failure, payload->>'db_function'
		from queues.task
		where payload @> any ($1::jsonb[])
		order by task_id desc
		limit 100`, docs)
	if err == nil {
		d.Tasks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (relatedTask, error) {
			var t relatedTask
			err := r.Scan(&t.ID, &t.Type, &t.Status, &t.EnqueuedAt, &t.Attempt, &t.LastError, &t.CallFailure, &t.Function)
			return t, err
		})
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" {
		d.TasksNote = "The search of the task table by payload took longer than " + relatedTasksTimeout.String() +
			" and was stopped (an index on queues.task's payload would make it fast)."
		return nil
	}
	return err
}

// jsonString returns the string (or the text of a number) at key in a JSON object.
func jsonString(doc json.RawMessage, key string) string {
	if len(doc) == 0 {
		return ""
	}
	var m map[string]any
	if json.Unmarshal(doc, &m) != nil {
		return ""
	}
	switch v := m[key].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
