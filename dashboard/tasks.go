package dashboard

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/humanize"
)

// taskFilter is a task listing's query: its filters and its place (keyset paging by id).
type taskFilter struct {
	Status string // "" for all
	Type   string
	From   string // as typed (datetime-local, UTC, or RFC 3339)
	To     string
	Key    string // idempotency key
	Before int64  // older than this id (the next page)
	After  int64  // newer than this id (the previous page)
	Limit  int

	from, to time.Time
}

var pageSizes = []int{25, 50, 100, 500}

// statusCondition is each status's condition as a literal, so that the planner can match it to
// the status's partial index (a parameter could not be).
var statusCondition = map[string]string{
	"waiting":   "t.status = 'waiting'",
	"pending":   "t.status = 'pending'",
	"running":   "t.status = 'running'",
	"completed": "t.status = 'completed'",
	"failed":    "t.status = 'failed'",
	"dead":      "t.status = 'dead'",
	"cancelled": "t.status = 'cancelled'",
}

// timeLayouts are the forms a time filter may take: the browser's datetime-local (read as UTC)
// and RFC 3339.
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339, "2006-01-02 15:04:05", "2006-01-02"}

func parseFilterTime(s string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badRequestf("%q is not a time: use YYYY-MM-DDTHH:MM (UTC) or RFC 3339", truncate(40, s))
}

func parseTaskFilter(q url.Values) (taskFilter, error) {
	f := taskFilter{
		Status: q.Get("status"), Type: strings.TrimSpace(q.Get("type")),
		From: strings.TrimSpace(q.Get("from")), To: strings.TrimSpace(q.Get("to")),
		Key: q.Get("key"), Limit: 50,
	}
	if f.Status != "" && statusCondition[f.Status] == "" {
		return f, badRequestf("unknown status %q", truncate(40, f.Status))
	}
	if f.Type != "" {
		if err := taskorch.ValidateTaskType(f.Type); err != nil {
			return f, badRequestf("%s", strings.TrimPrefix(err.Error(), "taskorch: "))
		}
	}
	var err error
	if f.From != "" {
		if f.from, err = parseFilterTime(f.From); err != nil {
			return f, err
		}
	}
	if f.To != "" {
		if f.to, err = parseFilterTime(f.To); err != nil {
			return f, err
		}
	}
	for name, dst := range map[string]*int64{"before": &f.Before, "after": &f.After} {
		if v := q.Get(name); v != "" {
			if *dst, err = strconv.ParseInt(v, 10, 64); err != nil || *dst <= 0 {
				return f, badRequestf("%s must be a task id", name)
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || !slices.Contains(pageSizes, n) {
			return f, badRequestf("limit must be one of %v", pageSizes)
		}
		f.Limit = n
	}
	if len(f.Key) > 512 {
		return f, badRequestf("an idempotency key has at most 512 characters")
	}
	return f, nil
}

// values encodes the filter (without its place) for links.
func (f taskFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "type": f.Type, "from": f.From, "to": f.To, "key": f.Key} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.Limit != 50 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	return v
}

// taskRow is a task as a listing shows it (no payload: it may be large).
type taskRow struct {
	ID          int64
	Type        string
	Status      string
	Priority    int
	Attempt     int
	MaxAttempts int
	EnqueuedAt  time.Time
	RunAt       time.Time
	Key         *string
	WorkerID    *string
	LastError   *string
	CallFailure *string // a channel task completed although its call failed (taskorch.Task.CallFailure)
	FinishedAt  *time.Time
	Function    *string // a db_function task's function (payload ->> 'db_function'), else nil
}

// taskList is one page of a listing, newest first, with the links to its neighbours.
type taskList struct {
	Tasks    []taskRow
	Filter   taskFilter
	Newer    template.URL // query string of the newer page, "" if none
	Older    template.URL
	Newest   template.URL // query string of the first page
	Types    []string     // suggestions for the type filter
	Statuses []taskorch.Status
	Sizes    []int
	Since    []sinceLink
	Path     string // the listing's path, for links
	Return   string // this page's URL, where actions come back to
	Fixed    bool   // the status is the page's (dead page): no status filter
	// Matching is how many tasks the filter matches, all pages together (at most maxCounted+1),
	// counted when the filter has a status; MatchActions are the actions on all of them that
	// the status allows.
	Matching     int64
	MatchingText string // Matching for people: "1,234", or "10,000+"
	MatchActions []matchAction
}

// matchAction is a button acting on every task a listing's filter matches.
type matchAction struct {
	Action string // retry, cancel, delete
	Label  string // Retry, Cancel, Delete
	Danger bool
}

// matchActions are the actions the tasks of a status may take, on all of them at once.
func matchActions(status string) []matchAction {
	var out []matchAction
	for _, a := range []admin.TaskAction{admin.ActionRetry, admin.ActionCancel, admin.ActionDelete} {
		if slices.Contains(a.Statuses(), status) {
			label := map[admin.TaskAction]string{admin.ActionRetry: "Retry", admin.ActionCancel: "Cancel", admin.ActionDelete: "Delete"}[a]
			out = append(out, matchAction{Action: string(a), Label: label, Danger: a != admin.ActionRetry})
		}
	}
	return out
}

type sinceLink struct {
	Label string
	Query template.URL
}

const taskRowColumns = `t.task_id, t.task_type, t.status::text, t.priority, t.attempt, t.max_attempts, t.enqueued_at, t.run_at,
       t.idempotency_key, t.worker_id, left(t.last_error, 300), t.call_failure,
       case t.status when 'completed' then t.completed_at when 'failed' then t.failed_at
                     when 'dead' then t.dead_at when 'cancelled' then t.cancelled_at end,
       case when t.task_type = 'db_function' then left(t.payload ->> 'db_function', 130) end`

// filterWhere builds the listing's conditions for f (without its place): constant fragments
// only, every value a parameter ($1...).
func filterWhere(f taskFilter) (string, []any) {
	var sb strings.Builder
	var args []any
	sb.WriteString("\nfrom queues.task t\nwhere true")
	cond := func(sql string, v any) {
		args = append(args, v)
		sb.WriteString("\n  and " + strings.Replace(sql, "?", "$"+strconv.Itoa(len(args)), 1))
	}
	if f.Status != "" {
		sb.WriteString("\n  and " + statusCondition[f.Status])
	}
	if f.Type != "" { // a task type, or one SQL function's queue (db_function:<schema.function>)
		args = append(args, f.Type)
		sb.WriteString("\n  and " + admin.TypeMatch("array[$"+strconv.Itoa(len(args))+"::text]"))
	}
	if f.Key != "" {
		cond("t.idempotency_key = ?", f.Key)
	}
	if !f.from.IsZero() {
		cond("t.enqueued_at >= ?", f.from)
	}
	if !f.to.IsZero() {
		cond("t.enqueued_at < ?", f.to)
	}
	return sb.String(), args
}

// maxCounted is where the count of the tasks a filter matches stops ("10,000+"): a count reads
// what it counts.
const maxCounted = 10_000

// countMatching counts the tasks f matches (the same conditions as the listing, and as
// admin.ActOnMatching's filter built from it), up to maxCounted+1.
func countMatching(ctx context.Context, tx pgx.Tx, f taskFilter) (int64, error) {
	where, args := filterWhere(f)
	args = append(args, maxCounted+1)
	var n int64
	err := tx.QueryRow(ctx, "select count(*) from (select 1"+where+"\nlimit $"+strconv.Itoa(len(args))+") m", args...).Scan(&n)
	return n, err
}

// listTasks reads one page of tasks. The statement is assembled from constant fragments only;
// every value is a parameter. Paging is by id (keyset), so a deep page costs what the first
// does: the primary key is walked from the cursor, or a status's partial index is read when
// that status is rare.
func listTasks(ctx context.Context, tx pgx.Tx, f taskFilter) ([]taskRow, bool, error) {
	var sb strings.Builder
	where, args := filterWhere(f)
	sb.WriteString("select " + taskRowColumns + where)
	cond := func(sql string, v any) {
		args = append(args, v)
		sb.WriteString("\n  and " + strings.Replace(sql, "?", "$"+strconv.Itoa(len(args)), 1))
	}
	order := "desc"
	switch {
	case f.After > 0:
		cond("t.task_id > ?", f.After)
		order = "asc"
	case f.Before > 0:
		cond("t.task_id < ?", f.Before)
	}
	args = append(args, f.Limit+1)
	sb.WriteString("\norder by t.task_id " + order + "\nlimit $" + strconv.Itoa(len(args)))

	rows, err := tx.Query(ctx, sb.String(), args...)
	if err != nil {
		return nil, false, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (taskRow, error) {
		var t taskRow
		err := r.Scan(&t.ID, &t.Type, &t.Status, &t.Priority, &t.Attempt, &t.MaxAttempts, &t.EnqueuedAt, &t.RunAt,
			&t.Key, &t.WorkerID, &t.LastError, &t.CallFailure, &t.FinishedAt, &t.Function)
		return t, err
	})
	if err != nil {
		return nil, false, err
	}
	more := len(out) > f.Limit
	if more {
		out = out[:f.Limit]
	}
	if order == "asc" {
		slices.Reverse(out)
	}
	return out, more, nil
}

// readTaskList reads the page and works out its links.
func (h *Handler) readTaskList(ctx context.Context, tx pgx.Tx, f taskFilter, listPath string) (*taskList, error) {
	tasks, more, err := listTasks(ctx, tx, f)
	if err != nil {
		return nil, err
	}
	l := &taskList{Tasks: tasks, Filter: f, Statuses: taskorch.Statuses, Sizes: pageSizes, Path: h.path(listPath)}
	base := f.values()
	l.Newest = queryURL(base)
	hasNewer := f.Before > 0 || (f.After > 0 && more)
	hasOlder := (f.After == 0 && more) || (f.After > 0)
	if len(tasks) > 0 {
		if hasNewer {
			v := cloneValues(base)
			v.Set("after", strconv.FormatInt(tasks[0].ID, 10))
			l.Newer = queryURL(v)
		}
		if hasOlder {
			v := cloneValues(base)
			v.Set("before", strconv.FormatInt(tasks[len(tasks)-1].ID, 10))
			l.Older = queryURL(v)
		}
	}
	if l.Types, err = h.taskTypes(ctx, tx); err != nil {
		return nil, err
	}
	if f.Status != "" {
		if l.Matching, err = countMatching(ctx, tx, f); err != nil {
			return nil, err
		}
		l.MatchActions = matchActions(f.Status)
		l.MatchingText = humanize.Thousands(min(l.Matching, maxCounted))
		if l.Matching > maxCounted {
			l.MatchingText += "+"
		}
	}
	var now time.Time
	if err := tx.QueryRow(ctx, `select now()`).Scan(&now); err != nil {
		return nil, err
	}
	for _, s := range []struct {
		label string
		d     time.Duration
	}{{"15m", 15 * time.Minute}, {"1h", time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}} {
		v := cloneValues(base)
		v.Set("from", now.Add(-s.d).UTC().Format("2006-01-02T15:04"))
		v.Del("to")
		l.Since = append(l.Since, sinceLink{Label: s.label, Query: queryURL(v)})
	}
	return l, nil
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// typesCacheTTL is how long the type suggestions are reused.
const typesCacheTTL = 30 * time.Second

// taskTypes suggests types for the filter: those of the newest tasks, of the schedules and of
// the paused queues, cached for typesCacheTTL. (A DISTINCT over the whole table would read all
// of it; any type can still be typed in.)
func (h *Handler) taskTypes(ctx context.Context, tx pgx.Tx) ([]string, error) {
	h.typesMu.Lock()
	defer h.typesMu.Unlock()
	if h.typesCache != nil && time.Since(h.typesAt) < typesCacheTTL {
		return h.typesCache, nil
	}
	rows, err := tx.Query(ctx, `
		select task_type from (select task_type from queues.task order by task_id desc limit 2000) recent
		union
		select task_type from queues.schedule
		union
		select task_type from queues.queue_pause
		order by 1
		limit 500`)
	if err != nil {
		return nil, err
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	h.typesCache, h.typesAt = types, time.Now()
	return types, nil
}

func (h *Handler) tasksPage(w http.ResponseWriter, r *http.Request) {
	f, err := parseTaskFilter(r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// Find: an id opens the task; a key lists the tasks with it (one opens directly).
	if q := strings.TrimSpace(r.URL.Query().Get("q")); q != "" {
		if id, err := strconv.ParseInt(strings.TrimPrefix(q, "#"), 10, 64); err == nil && id > 0 {
			http.Redirect(w, r, h.path("/tasks/"+strconv.FormatInt(id, 10)), http.StatusSeeOther)
			return
		}
		f.Key = q
		if len(f.Key) > 512 {
			h.fail(w, r, badRequestf("an idempotency key has at most 512 characters"))
			return
		}
	}
	var l *taskList
	err = h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		l, err = h.readTaskList(ctx, tx, f, "/tasks")
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if f.Key != "" && len(l.Tasks) == 1 && f.Before == 0 && f.After == 0 && r.URL.Query().Get("q") != "" {
		http.Redirect(w, r, h.path("/tasks/"+strconv.FormatInt(l.Tasks[0].ID, 10)), http.StatusSeeOther)
		return
	}
	l.Return = h.path(r.URL.RequestURI())
	h.render(w, r, http.StatusOK, "tasks", "Tasks", "tasks", l)
}

// deadPage lists dead tasks (or failed ones, ?status=failed) for retrying or cancelling, one
// or many at a time.
func (h *Handler) deadPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if s := q.Get("status"); s != "failed" {
		q.Set("status", "dead")
	}
	f, err := parseTaskFilter(q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var l *taskList
	err = h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		l, err = h.readTaskList(ctx, tx, f, "/dead")
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	l.Fixed = true
	l.Return = h.path(r.URL.RequestURI())
	h.render(w, r, http.StatusOK, "dead", "Dead tasks", "dead", l)
}
