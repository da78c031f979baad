package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrProcessNotFound is returned for a process name that queues.process does not list.
var ErrProcessNotFound = errors.New("unknown process")

// ErrInstanceNotFound is returned by ShowProcessInstance for an id the process has no instance
// with.
var ErrInstanceNotFound = errors.New("process instance not found")

// ProcessStates are the states of a process instance, in the order views show them
// (docs/processes.md, "Seeing processes"). succeeded, failed and timed_out are terminal;
// timed_out is a wait step's signal that did not come in time (docs/processes.md, "Outcomes"):
// an outcome, not a failure.
var ProcessStates = []string{"running", "waiting", "succeeded", "failed", "timed_out"}

// ProcessInstance is one instance of a registered process, as queues.process_instances returns
// it.
type ProcessInstance struct {
	Process       string     `json:"process"`
	ID            int64      `json:"instance_id"`
	State         string     `json:"state"`
	WaitUntil     *time.Time `json:"wait_until,omitempty"`
	Attempts      *int       `json:"attempts"` // nil: the process has no attempts of its own
	StartedAt     time.Time  `json:"started_at"`
	EndedAt       *time.Time `json:"ended_at,omitempty"`
	Error         *string    `json:"error,omitempty"`
	ParentProcess *string    `json:"parent_process,omitempty"`
	ParentID      *int64     `json:"parent_id,omitempty"`
}

// ProcessFilter selects the instances ListProcessInstances returns.
type ProcessFilter struct {
	State   string // one of ProcessStates; "" for every state
	Process string // schema.name; "" for every registered process
	Limit   int    // 1 to 10000; 0 means 100
}

// ListProcessInstances returns the newest instances of the registered processes through
// queues.process_instances. An unknown Process is ErrProcessNotFound.
func ListProcessInstances(ctx context.Context, db DB, f ProcessFilter) ([]ProcessInstance, error) {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Process != "" {
		if _, err := lookupProcess(ctx, db, f.Process); err != nil {
			return nil, err
		}
	}
	rows, err := db.Query(ctx, `
		select process, instance_id, state, wait_until, attempts, started_at, ended_at, error, parent_process, parent_id
		from queues.process_instances($1, $2, $3)`, nullable(f.State), f.Limit, nullable(f.Process))
	if err != nil {
		return nil, fmt.Errorf("list process instances: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanProcessInstance)
	if err != nil {
		return nil, fmt.Errorf("list process instances: %w", err)
	}
	return out, nil
}

func scanProcessInstance(r pgx.CollectableRow) (ProcessInstance, error) {
	var x ProcessInstance
	err := r.Scan(&x.Process, &x.ID, &x.State, &x.WaitUntil, &x.Attempts, &x.StartedAt, &x.EndedAt, &x.Error,
		&x.ParentProcess, &x.ParentID)
	return x, err
}

// ProcessCount is how many instances of a process are in each state, each count stopping at
// the cap ProcessInstanceCounts was given.
type ProcessCount struct {
	Process   string `json:"process"`
	Title     string `json:"title"`
	Running   *int64 `json:"running"` // nil: not counted (see ProcessInstanceCounts)
	Waiting   *int64 `json:"waiting"`
	Succeeded *int64 `json:"succeeded"`
	Failed    *int64 `json:"failed"`
	TimedOut  *int64 `json:"timed_out"`
}

// ProcessInstanceCounts returns the counts of every registered process
// (queues.process_instance_counts), each at most limit, of the given states only (nil: all).
func ProcessInstanceCounts(ctx context.Context, db DB, limit int, states []string) ([]ProcessCount, error) {
	rows, err := db.Query(ctx, `select process, title, running, waiting, succeeded, failed, timed_out from queues.process_instance_counts($1, $2)`, limit, states)
	if err != nil {
		return nil, fmt.Errorf("count process instances: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProcessCount, error) {
		var c ProcessCount
		err := r.Scan(&c.Process, &c.Title, &c.Running, &c.Waiting, &c.Succeeded, &c.Failed, &c.TimedOut)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count process instances: %w", err)
	}
	return out, nil
}

// registered is a row of queues.process.
type registered struct {
	Schema, Name, View, Title string
}

func (p registered) ident(table string) string { return pgx.Identifier{p.Schema, table}.Sanitize() }

func lookupProcess(ctx context.Context, db DB, process string) (registered, error) {
	var p registered
	err := db.QueryRow(ctx, `select process_schema, process_name, instances_view, title from queues.process where process = $1`, process).
		Scan(&p.Schema, &p.Name, &p.View, &p.Title)
	if errors.Is(err, pgx.ErrNoRows) {
		var names []string
		if err := db.QueryRow(ctx, `select coalesce(array_agg(process order by process), '{}') from queues.process`).Scan(&names); err != nil {
			return p, fmt.Errorf("list processes: %w", err)
		}
		known := "none"
		if len(names) > 0 {
			known = strings.Join(names, ", ")
		}
		return p, fmt.Errorf("%w %q (registered: %s)", ErrProcessNotFound, truncate(process, 120), known)
	}
	if err != nil {
		return p, fmt.Errorf("look up process: %w", err)
	}
	return p, nil
}

// ProcessAttempt is one attempt of an instance, numbered 1..n in the order they were made.
type ProcessAttempt struct {
	N          int        `json:"n"`
	ID         int64      `json:"attempt_id"`
	CreatedAt  *time.Time `json:"created_at,omitempty"`
	TaskID     *int64     `json:"task_id,omitempty"`     // the channel task that ran it, if any
	TaskStatus *string    `json:"task_status,omitempty"` // that task's status now
	Outcome    string     `json:"outcome"`               // succeeded, failed or outstanding
	EndedAt    *time.Time `json:"ended_at,omitempty"`    // when its outcome fact was recorded
	Error      *string    `json:"error,omitempty"`       // the failure fact's error_message
	// ErrorClass is the failure fact's error_class, "permanent" (the provider said retrying
	// cannot succeed: the run ended at once) or "retriable"; nil for a process whose failure
	// facts have no class (docs/processes.md, "Permanent failures").
	ErrorClass *string `json:"error_class,omitempty"`
}

// Permanent reports whether the attempt failed permanently.
func (a ProcessAttempt) Permanent() bool { return a.ErrorClass != nil && *a.ErrorClass == "permanent" }

// ProcessFact is one fact of an instance: its start, an attempt's start or outcome, its
// terminal outcome.
type ProcessFact struct {
	At     time.Time `json:"at"`
	Fact   string    `json:"fact"`
	Detail string    `json:"detail,omitempty"`
}

// ProcessTask is a supervisor run of an instance: a db_function task naming it.
type ProcessTask struct {
	ID        int64     `json:"task_id"`
	Status    string    `json:"status"`
	RunAt     time.Time `json:"run_at"`
	Attempt   int       `json:"attempt"`
	LastError *string   `json:"last_error,omitempty"`
}

// ProcessDetail is everything ShowProcessInstance knows of an instance.
type ProcessDetail struct {
	Title     string            `json:"title"`
	Instance  ProcessInstance   `json:"instance"`
	Attempts  []ProcessAttempt  `json:"attempts"`
	Facts     []ProcessFact     `json:"facts"`
	Tasks     []ProcessTask     `json:"supervisor_tasks"`
	TasksNote string            `json:"supervisor_tasks_note,omitempty"`
	Children  []ProcessInstance `json:"children"` // instances naming it as their parent
	// Restarts are the instance's restarts by hand, by run; EarlierFailures the failures of
	// the runs they restarted (docs/processes.md, "Retrying a failed process").
	Restarts        []ProcessRestart    `json:"restarts"`
	EarlierFailures []ProcessRunFailure `json:"earlier_failures"`
	// Permanent reports that the instance failed at once on a permanent failure: it is failed
	// and its last attempt failed permanently (docs/processes.md, "Permanent failures").
	Permanent bool `json:"permanent"`
}

// supervisorTasksTimeout bounds the search of queue tasks by payload: finished tasks are not
// in an index by payload, so it may read the task table.
const supervisorTasksTimeout = 3 * time.Second

// ShowProcessInstance returns an instance of process ("schema.name") with its attempts, facts,
// supervisor tasks and children. Table names come from the registry and the catalog, quoted;
// the id is a parameter. It reads in one read-only transaction when db can begin one.
func ShowProcessInstance(ctx context.Context, db DB, process string, id int64) (*ProcessDetail, error) {
	p, err := lookupProcess(ctx, db, process)
	if err != nil {
		return nil, err
	}
	d := &ProcessDetail{Title: p.Title, Attempts: []ProcessAttempt{}, Facts: []ProcessFact{}, Tasks: []ProcessTask{}, Children: []ProcessInstance{},
		Restarts: []ProcessRestart{}, EarlierFailures: []ProcessRunFailure{}}
	x, err := getInstance(ctx, db, p, id)
	if err != nil {
		return nil, err
	}
	d.Instance = *x
	tables, err := processTables(ctx, db, p)
	if err != nil {
		return nil, err
	}
	if err := readAttempts(ctx, db, p, tables, id, d); err != nil {
		return nil, err
	}
	if err := readRestarts(ctx, db, p, id, d); err != nil {
		return nil, err
	}
	if n := len(d.Attempts); n > 0 && d.Instance.State == "failed" {
		d.Permanent = d.Attempts[n-1].Permanent()
	}
	d.Facts = processFacts(d)
	if d.Children, err = ProcessChildren(ctx, db, process, id); err != nil {
		return nil, err
	}
	if err := readSupervisorTasks(ctx, db, p, id, d); err != nil {
		return nil, err
	}
	return d, nil
}

// processTables says which of the process's building-block tables exist, with their columns.
func processTables(ctx context.Context, db DB, p registered) (map[string][]string, error) {
	rows, err := db.Query(ctx, `
		select c.relname::text, array(select a.attname::text from pg_catalog.pg_attribute a
		                               where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped)
		from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
		where n.nspname = $1 and c.relname = any ($2) and c.relkind in ('r', 'p')`,
		p.Schema, []string{p.Name + "_attempt", p.Name + "_attempt_succeeded", p.Name + "_attempt_failed"})
	if err != nil {
		return nil, fmt.Errorf("read the catalog: %w", err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var name string
		var cols []string
		if err := rows.Scan(&name, &cols); err != nil {
			rows.Close()
			return nil, err
		}
		out[strings.TrimPrefix(name, p.Name)] = cols
	}
	return out, rows.Err()
}

func has(cols []string, c string) bool {
	for _, x := range cols {
		if x == c {
			return true
		}
	}
	return false
}

func readAttempts(ctx context.Context, db DB, p registered, tables map[string][]string, id int64, d *ProcessDetail) error {
	att, ok := tables["_attempt"]
	aid, tid := p.Name+"_attempt_id", p.Name+"_task_id"
	if !ok || !has(att, aid) || !has(att, tid) {
		return nil
	}
	q := func(c string) string { return pgx.Identifier{c}.Sanitize() }
	created, task := "null::timestamptz", "null::bigint"
	if has(att, "created_at") {
		created = "a.created_at"
	}
	if has(att, "task_id") {
		task = "a.task_id"
	}
	failClass := "null::text"
	if has(tables["_attempt_failed"], aid) && has(tables["_attempt_failed"], "error_class") {
		failClass = "f.error_class::text"
	}
	fact := func(suffix string, withErr bool) (join, at, errMsg string) {
		cols, ok := tables[suffix]
		if !ok || !has(cols, aid) {
			return "", "null::timestamptz", "null::text"
		}
		alias := "s"
		if withErr {
			alias = "f"
		}
		join = " left join " + p.ident(p.Name+suffix) + " " + alias + " on " + alias + "." + q(aid) + " = a." + q(aid)
		at, errMsg = "null::timestamptz", "null::text"
		if has(cols, "created_at") {
			at = alias + ".created_at"
		}
		if withErr && has(cols, "error_message") {
			errMsg = alias + ".error_message::text"
		}
		// A fact row exists: mark it even without created_at.
		return join, "case when " + alias + "." + q(aid) + " is not null then coalesce(" + at + ", '-infinity') end", errMsg
	}
	okJoin, okAt, _ := fact("_attempt_succeeded", false)
	failJoin, failAt, failErr := fact("_attempt_failed", true)
	rows, err := db.Query(ctx, `select a.`+q(aid)+`, `+created+`, `+task+`, t.status::text, `+okAt+`, `+failAt+`, `+failErr+`, `+failClass+`
		from `+p.ident(p.Name+"_attempt")+` a`+okJoin+failJoin+`
		left join queues.task t on t.task_id = `+task+`
		where a.`+q(tid)+` = $1 order by a.`+q(aid)+` limit 1000`, id)
	if err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	d.Attempts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProcessAttempt, error) {
		var a ProcessAttempt
		var okAt, failAt *time.Time
		err := r.Scan(&a.ID, &a.CreatedAt, &a.TaskID, &a.TaskStatus, &okAt, &failAt, &a.Error, &a.ErrorClass)
		switch {
		case okAt != nil:
			a.Outcome, a.EndedAt = "succeeded", okAt
		case failAt != nil:
			a.Outcome, a.EndedAt = "failed", failAt
		default:
			a.Outcome = "outstanding"
		}
		return a, err
	})
	if err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	for i := range d.Attempts {
		d.Attempts[i].N = i + 1
		if d.Attempts[i].EndedAt != nil && d.Attempts[i].EndedAt.IsZero() {
			d.Attempts[i].EndedAt = nil
		}
	}
	return nil
}

// processFacts puts the instance's facts in time order: started, each attempt made and its
// outcome, the failures of restarted runs and the restarts, the terminal outcome.
func processFacts(d *ProcessDetail) []ProcessFact {
	out := []ProcessFact{{At: d.Instance.StartedAt, Fact: "started"}}
	for _, a := range d.Attempts {
		if a.CreatedAt != nil {
			detail := ""
			if a.TaskID != nil {
				detail = fmt.Sprintf("task %d", *a.TaskID)
			}
			out = append(out, ProcessFact{At: *a.CreatedAt, Fact: fmt.Sprintf("attempt %d made", a.N), Detail: detail})
		}
		if a.EndedAt != nil {
			fact := fmt.Sprintf("attempt %d %s", a.N, a.Outcome)
			if a.Outcome == "failed" && a.Permanent() {
				fact += " (permanent)"
			}
			out = append(out, ProcessFact{At: *a.EndedAt, Fact: fact, Detail: deref(a.Error)})
		}
	}
	for _, f := range d.EarlierFailures {
		out = append(out, ProcessFact{At: f.At, Fact: fmt.Sprintf("failed (run %d)", f.Run), Detail: f.Error})
	}
	for _, r := range d.Restarts {
		out = append(out, ProcessFact{At: r.RestartedAt, Fact: fmt.Sprintf("restarted (run %d)", r.Run),
			Detail: fmt.Sprintf("by %s: %s", r.RestartedBy, r.Reason)})
	}
	if d.Instance.EndedAt != nil {
		out = append(out, ProcessFact{At: *d.Instance.EndedAt, Fact: d.Instance.State, Detail: deref(d.Instance.Error)})
	}
	// Stable: facts recorded in the same transaction keep the order above.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].At.Before(out[j-1].At); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// GetProcessInstance returns an instance of process ("schema.name") from its instances view:
// ErrProcessNotFound or ErrInstanceNotFound when there is none.
func GetProcessInstance(ctx context.Context, db DB, process string, id int64) (*ProcessInstance, error) {
	p, err := lookupProcess(ctx, db, process)
	if err != nil {
		return nil, err
	}
	return getInstance(ctx, db, p, id)
}

func getInstance(ctx context.Context, db DB, p registered, id int64) (*ProcessInstance, error) {
	process := p.Schema + "." + p.Name
	rows, err := db.Query(ctx, `select $1::text, instance_id, state, wait_until, attempts, started_at, ended_at, error, parent_process, parent_id
		from `+p.ident(p.View)+` where instance_id = $2`, process, id)
	if err != nil {
		return nil, fmt.Errorf("show %s %d: %w", process, id, err)
	}
	xs, err := pgx.CollectRows(rows, scanProcessInstance)
	if err != nil {
		return nil, fmt.Errorf("show %s %d: %w", process, id, err)
	}
	if len(xs) == 0 {
		return nil, fmt.Errorf("%w: %s has no instance %d", ErrInstanceNotFound, process, id)
	}
	return &xs[0], nil
}

// ProcessChildren returns the instances of every registered process that name process
// ("schema.name") instance id as their parent (an account deletion's file deletions and
// anonymization), by process then id.
func ProcessChildren(ctx context.Context, db DB, process string, id int64) ([]ProcessInstance, error) {
	rows, err := db.Query(ctx, `select process_schema, process_name, instances_view, title from queues.process order by process`)
	if err != nil {
		return nil, fmt.Errorf("read children: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (registered, error) {
		var p registered
		err := r.Scan(&p.Schema, &p.Name, &p.View, &p.Title)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read children: %w", err)
	}
	out := []ProcessInstance{}
	for _, c := range ps {
		rows, err := db.Query(ctx, `select $3::text, instance_id, state, wait_until, attempts, started_at, ended_at, error, parent_process, parent_id
			from `+c.ident(c.View)+` where parent_id = $2 and parent_process = $1 order by instance_id limit 1000`,
			process, id, c.Schema+"."+c.Name)
		if err != nil {
			return nil, fmt.Errorf("read children: %w", err)
		}
		xs, err := pgx.CollectRows(rows, scanProcessInstance)
		if err != nil {
			return nil, fmt.Errorf("read children: %w", err)
		}
		out = append(out, xs...)
	}
	return out, nil
}

// readSupervisorTasks finds the db_function tasks that ran or will run the instance's
// supervisor, newest first. It runs last, under a shorter statement timeout, in a subtransaction
// when db is a transaction: when it times out the detail says so instead of failing.
func readSupervisorTasks(ctx context.Context, db DB, p registered, id int64, d *ProcessDetail) error {
	doc, err := json.Marshal(map[string]any{"db_function": p.Schema + "." + p.Name + "_supervisor", p.Name + "_task_id": id})
	if err != nil {
		return err
	}
	tx, isTx := db.(pgx.Tx)
	if isTx {
		tx, err = tx.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, fmt.Sprintf("set local statement_timeout = %d", supervisorTasksTimeout.Milliseconds())); err != nil {
			return err
		}
		db = tx
	}
	rows, err := db.Query(ctx, `select task_id, status::text, run_at, attempt, left(last_error, 300)
		from queues.task where task_type = 'db_function' and payload @> $1::jsonb
		order by task_id desc limit 100`, string(doc))
	if err == nil {
		d.Tasks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProcessTask, error) {
			var t ProcessTask
			err := r.Scan(&t.ID, &t.Status, &t.RunAt, &t.Attempt, &t.LastError)
			return t, err
		})
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" {
		d.Tasks = []ProcessTask{}
		d.TasksNote = "the search of queues.task by payload took longer than " + supervisorTasksTimeout.String() + " and was stopped"
		return nil
	}
	if err != nil {
		return fmt.Errorf("read supervisor tasks: %w", err)
	}
	return nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
