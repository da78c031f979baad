package taskorch

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// TaskArgs is a task's payload as a Go value: it is marshalled to JSON (it must marshal to a
// JSON object) and enqueued under the type TaskType returns.
//
//	type SendReport struct{ AccountID int64 `json:"account_id"` }
//	func (SendReport) TaskType() string { return "send_report" }
type TaskArgs interface {
	TaskType() string
}

// TaskArgsWithOpts is implemented by args that carry their own default EnqueueOpts. Options
// passed to Enqueue override them field by field: each field that is set (non-nil, non-zero)
// replaces the default's.
type TaskArgsWithOpts interface {
	TaskArgs
	EnqueueOpts() EnqueueOpts
}

// RawArgs enqueues a task from a type name and a ready-made JSON object, for callers that do
// not model payloads as Go types (the SQL-first world, the CLI).
type RawArgs struct {
	Type    string
	Payload json.RawMessage // a JSON object; empty means {}
}

// TaskType returns r.Type.
func (r RawArgs) TaskType() string { return r.Type }

// MarshalJSON returns the payload as given ({} when empty).
func (r RawArgs) MarshalJSON() ([]byte, error) {
	if len(r.Payload) == 0 {
		return []byte("{}"), nil
	}
	return r.Payload, nil
}

// EnqueueOpts are per-task options. The zero value means the defaults: those of the args'
// EnqueueOpts method (TaskArgsWithOpts) where it sets them, then the database's.
type EnqueueOpts struct {
	// Priority: higher runs first. Nil means the args' default, else 0. A pointer, so that an
	// explicit 0 is not mistaken for "unset": new(0) enqueues at priority 0 even when the args'
	// default is another.
	//
	//	&taskorch.EnqueueOpts{Priority: new(5)}
	Priority *int
	// ScheduledAt: the task is not run before this time. Defaults to now (the database's clock).
	ScheduledAt time.Time
	// IdempotencyKey: at most one task exists per (type, key); enqueuing again returns the
	// existing task's id with Duplicate set. Defaults to none.
	IdempotencyKey string
	// MaxAttempts: attempts before the task is dead (the first run included). Defaults to 25.
	MaxAttempts int
	// DebounceKey and Debounce make the enqueue debounced (queues.enqueue_debounced): while a
	// task of the type with this key is pending, enqueuing again replaces its payload and
	// priority and moves it to run Debounce from now, instead of adding a task; once it has
	// started, the next enqueue adds a new one. A burst runs once, with the last payload,
	// Debounce after the last enqueue. Not with IdempotencyKey or ScheduledAt, and not in
	// EnqueueMany.
	DebounceKey string
	Debounce    time.Duration
	// After names the tasks this one waits for, its parents (docs/workflows.md): it is created
	// with status waiting, is never claimed while it waits, and becomes pending in the
	// transaction that ends its last parent. Parents may be enqueued in the same transaction
	// (EnqueueTx) or exist already; one that already ended counts at once. A parent that does
	// not exist is an ErrInvalidInput error and nothing is enqueued. Not with DebounceKey. In
	// EnqueueMany, every task of the call names the same parents.
	After []int64
	// OnParentFailure says what a parent in After that ends failed, dead or cancelled does to
	// this task: ParentFailureCancel (the default, "") cancels it and, in turn, the tasks that
	// wait for it; ParentFailureRun counts that parent as ended, so the task runs once every
	// parent has ended, whatever their outcomes.
	OnParentFailure ParentFailurePolicy
}

// ParentFailurePolicy is EnqueueOpts.OnParentFailure: what a parent that ends failed, dead or
// cancelled does to a task that waits for it.
type ParentFailurePolicy string

const (
	// ParentFailureCancel cancels the waiting task, and transitively the tasks waiting for it,
	// each with an event naming the parent that caused it.
	ParentFailureCancel ParentFailurePolicy = "cancel"
	// ParentFailureRun counts the parent as ended: the task becomes due when all its parents
	// ended, whatever their outcomes.
	ParentFailureRun ParentFailurePolicy = "run"
)

// EnqueueResult is the outcome of enqueuing one task.
type EnqueueResult struct {
	// TaskID is the new task's id, or the existing task's id when Duplicate.
	TaskID int64
	// Duplicate is true when a task with the same type and idempotency key already existed and
	// nothing was inserted.
	Duplicate bool
	// Debounced is true when a pending task with the same type and debounce key took this
	// enqueue (EnqueueOpts.DebounceKey): nothing was inserted.
	Debounced bool
}

// EnqueueParams is one task of an EnqueueMany call.
type EnqueueParams struct {
	Args TaskArgs
	Opts *EnqueueOpts
}

// maxMaxAttempts bounds EnqueueOpts.MaxAttempts (the column is an int).
const maxMaxAttempts = 1_000_000

var taskTypePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]{0,127}$`)

// ValidateTaskType returns an ErrInvalidInput error unless t is a valid task type: 1 to 128
// letters, digits, "_", ".", ":" or "-", starting with a letter.
func ValidateTaskType(t string) error {
	if t == "" {
		return inputErrorf("task type must not be empty")
	}
	if !taskTypePattern.MatchString(t) {
		return inputErrorf("task type %q is malformed: use 1 to 128 letters, digits, \"_\", \".\", \":\" or \"-\", starting with a letter", t)
	}
	return nil
}

// enqueueRow is one task ready to send.
type enqueueRow struct {
	taskType    string
	payload     string
	scheduledAt *time.Time
	priority    int32
	key         *string
	maxAttempts *int32
	debounceKey string
	debounce    time.Duration
	after       []int64
	onFailure   string
}

// prepare validates and encodes one task. validType is a type already validated by the caller
// (a batch usually holds one type), or "".
func (c *Client) prepare(args TaskArgs, opts *EnqueueOpts, validType string) (enqueueRow, error) {
	if args == nil {
		return enqueueRow{}, inputErrorf("args must not be nil")
	}
	taskType := args.TaskType()
	if taskType != validType || validType == "" {
		if err := ValidateTaskType(taskType); err != nil {
			return enqueueRow{}, err
		}
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return enqueueRow{}, inputErrorf("payload of %s does not marshal to JSON: %v", taskType, err)
	}
	if len(payload) == 0 || payload[0] != '{' {
		return enqueueRow{}, inputErrorf("payload of %s must be a JSON object, got %.40s", taskType, payload)
	}
	if c.cfg.MaxPayloadBytes > 0 && len(payload) > c.cfg.MaxPayloadBytes {
		return enqueueRow{}, inputErrorf("payload of %s is %d bytes, over the client's limit of %d bytes "+
			"(ClientConfig.MaxPayloadBytes, 1 MiB by default; the database refuses payloads over 8 MiB whatever it is)",
			taskType, len(payload), c.cfg.MaxPayloadBytes)
	}

	o := EnqueueOpts{}
	if d, ok := args.(TaskArgsWithOpts); ok {
		o = d.EnqueueOpts()
	}
	if opts != nil {
		if opts.Priority != nil {
			o.Priority = opts.Priority
		}
		if !opts.ScheduledAt.IsZero() {
			o.ScheduledAt = opts.ScheduledAt
		}
		if opts.IdempotencyKey != "" {
			o.IdempotencyKey = opts.IdempotencyKey
		}
		if opts.MaxAttempts != 0 {
			o.MaxAttempts = opts.MaxAttempts
		}
		o.DebounceKey, o.Debounce = opts.DebounceKey, opts.Debounce
		o.After, o.OnParentFailure = opts.After, opts.OnParentFailure
	}
	switch o.OnParentFailure {
	case "", ParentFailureCancel, ParentFailureRun:
	default:
		return enqueueRow{}, inputErrorf("OnParentFailure must be %q or %q, got %q", ParentFailureCancel, ParentFailureRun, o.OnParentFailure)
	}
	if o.OnParentFailure != "" && len(o.After) == 0 {
		return enqueueRow{}, inputErrorf("OnParentFailure needs After (the parents it is about)")
	}
	if len(o.After) > 0 && (o.DebounceKey != "" || o.Debounce != 0) {
		return enqueueRow{}, inputErrorf("a debounced enqueue takes no After")
	}
	if o.DebounceKey != "" || o.Debounce != 0 {
		switch {
		case o.DebounceKey == "":
			return enqueueRow{}, inputErrorf("Debounce needs a DebounceKey")
		case len(o.DebounceKey) > 512:
			return enqueueRow{}, inputErrorf("debounce key must be at most 512 characters, got %d", len(o.DebounceKey))
		case o.Debounce < 0:
			return enqueueRow{}, inputErrorf("Debounce must not be negative, got %s", o.Debounce)
		case o.IdempotencyKey != "" || !o.ScheduledAt.IsZero():
			return enqueueRow{}, inputErrorf("a debounced enqueue takes neither an IdempotencyKey nor a ScheduledAt (it runs Debounce after the last enqueue)")
		}
	}
	if o.MaxAttempts < 0 || o.MaxAttempts > maxMaxAttempts {
		return enqueueRow{}, inputErrorf("max attempts must be between 1 and %d, got %d", maxMaxAttempts, o.MaxAttempts)
	}
	if len(o.IdempotencyKey) > 512 {
		return enqueueRow{}, inputErrorf("idempotency key must be at most 512 characters, got %d", len(o.IdempotencyKey))
	}
	priority := 0
	if o.Priority != nil {
		priority = *o.Priority
	}
	if priority > 1<<31-1 || priority < -(1<<31) {
		return enqueueRow{}, inputErrorf("priority %d is out of range", priority)
	}

	row := enqueueRow{taskType: taskType, payload: string(payload), priority: int32(priority)}
	if !o.ScheduledAt.IsZero() {
		at := o.ScheduledAt
		row.scheduledAt = &at
	}
	if o.IdempotencyKey != "" {
		k := o.IdempotencyKey
		row.key = &k
	}
	if o.MaxAttempts > 0 {
		m := int32(o.MaxAttempts) //nolint:gosec // bounded by maxMaxAttempts above
		row.maxAttempts = &m
	}
	row.debounceKey, row.debounce = o.DebounceKey, o.Debounce
	if len(o.After) > 0 {
		row.after = o.After
		row.onFailure = string(ParentFailureCancel)
		if o.OnParentFailure != "" {
			row.onFailure = string(o.OnParentFailure)
		}
	}
	return row, nil
}

const enqueueDebouncedSQL = `select task_id, debounced from queues.enqueue_debounced($1, $2::jsonb, $3, $4::interval, $5, $6)`

const enqueueSQL = `select task_id, duplicate from queues.enqueue_with_result($1, $2::jsonb, coalesce($3, now()), $4, $5, $6)`

// insertTaskSQL enqueues a task that names no function: queues.insert_task, which the enqueue
// functions call after asking for a permit for the functions a task names (docs/security.md,
// "Who may name a function"). A task of another type needs none, and the trigger on the task
// table still refuses any row that names a function without a permit; calling it directly
// saves a function call per task (docs/benchmarks.md, "Enqueue in the application's
// transaction").
const insertTaskSQL = `select task_id, duplicate from queues.insert_task($1, $2::jsonb, coalesce($3, now()), $4, $5, $6)`

// enqueueAfterSQL and insertTaskAfterSQL are enqueueSQL and insertTaskSQL for a task with
// parents (EnqueueOpts.After).
const (
	enqueueAfterSQL    = `select task_id, duplicate from queues.enqueue_with_result($1, $2::jsonb, coalesce($3, now()), $4, $5, $6, $7::bigint[], $8)`
	insertTaskAfterSQL = `select task_id, duplicate from queues.insert_task($1, $2::jsonb, coalesce($3, now()), $4, $5, $6, $7::bigint[], $8)`
)

// namesFunctions says whether tasks of this type name SQL functions (a db_function, a channel
// task's handlers): their enqueue asks for a permit (docs/security.md).
func namesFunctions(taskType string) bool {
	switch taskType {
	case TypeDBFunction, TypeEmail, TypeSMS, TypeFileDelete:
		return true
	}
	return false
}

// Enqueue adds one task. opts may be nil.
func (c *Client) Enqueue(ctx context.Context, args TaskArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	return c.enqueue(ctx, c.pool, args, opts)
}

// EnqueueTx adds one task in the caller's transaction: it exists only if tx commits.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, args TaskArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	return c.enqueue(ctx, tx, args, opts)
}

func (c *Client) enqueue(ctx context.Context, db DBTX, args TaskArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	row, err := c.prepare(args, opts, "")
	if err != nil {
		return nil, err
	}
	row.payload = c.withTraceContext(ctx, row.payload)
	var res EnqueueResult
	if row.debounceKey != "" {
		err = db.QueryRow(ctx, enqueueDebouncedSQL, row.taskType, row.payload, row.debounceKey, row.debounce, row.priority, row.maxAttempts).
			Scan(&res.TaskID, &res.Debounced)
	} else if row.after != nil {
		sql := insertTaskAfterSQL
		if namesFunctions(row.taskType) {
			sql = enqueueAfterSQL
		}
		err = db.QueryRow(ctx, sql, row.taskType, row.payload, row.scheduledAt, row.priority, row.key, row.maxAttempts, row.after, row.onFailure).
			Scan(&res.TaskID, &res.Duplicate)
	} else {
		sql := insertTaskSQL
		if namesFunctions(row.taskType) {
			sql = enqueueSQL
		}
		err = db.QueryRow(ctx, sql, row.taskType, row.payload, row.scheduledAt, row.priority, row.key, row.maxAttempts).
			Scan(&res.TaskID, &res.Duplicate)
	}
	if err != nil {
		return nil, fmt.Errorf("enqueue %s: %w", row.taskType, withoutLabel(mapError(err), "enqueue: ", "enqueue_debounced: "))
	}
	return &res, nil
}

const enqueueManySQL = `select task_id, duplicate
from queues.enqueue_many_with_result($1::text[], $2::jsonb[], $3::timestamptz[], $4::integer[], $5::text[], $6::integer[])`

// insertTasksSQL is enqueueManySQL for a batch no task of which names a function (insertTaskSQL).
const insertTasksSQL = `select task_id, duplicate
from queues.insert_tasks($1::text[], $2::jsonb[], $3::timestamptz[], $4::integer[], $5::text[], $6::integer[])`

// enqueueManyAfterSQL and insertTasksAfterSQL are enqueueManySQL and insertTasksSQL for tasks
// with parents (EnqueueOpts.After), the same for every task of the call.
const (
	enqueueManyAfterSQL = `select task_id, duplicate
from queues.enqueue_many_with_result($1::text[], $2::jsonb[], $3::timestamptz[], $4::integer[], $5::text[], $6::integer[], $7::bigint[], $8)`
	insertTasksAfterSQL = `select task_id, duplicate
from queues.insert_tasks($1::text[], $2::jsonb[], $3::timestamptz[], $4::integer[], $5::text[], $6::integer[], $7::bigint[], $8)`
)

// parentSet is After as the database keeps it: sorted, without duplicates; nil for none.
func parentSet(after []int64) []int64 {
	if len(after) == 0 {
		return nil
	}
	set := slices.Clone(after)
	slices.Sort(set)
	return slices.Compact(set)
}

// EnqueueMany adds many tasks in one statement (a set-based insert; one NOTIFY for all) and
// returns one result per task, in the order given: the new task's id, or, where an idempotency
// key matched an existing task (or a task earlier in the batch), that task's id with Duplicate
// set. Either every task is enqueued or none is. Tasks may name parents (EnqueueOpts.After):
// the tasks that name the same parents (in any order, duplicates ignored) under the same
// OnParentFailure go in one statement, one statement per such group, in the order each group
// first appears, all in one transaction (a savepoint in EnqueueManyTx's). A task that was a
// duplicate keeps its own parents (docs/workflows.md).
func (c *Client) EnqueueMany(ctx context.Context, params []EnqueueParams) ([]*EnqueueResult, error) {
	return c.enqueueMany(ctx, c.pool, params)
}

// EnqueueManyTx is EnqueueMany in the caller's transaction.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, params []EnqueueParams) ([]*EnqueueResult, error) {
	return c.enqueueMany(ctx, tx, params)
}

// manyBatch is EnqueueMany's tasks as columns, and the groups of tasks that share parents.
type manyBatch struct {
	types, payloads []string
	scheduled       []*time.Time
	priorities      []int32
	keys            []*string
	maxAttempts     []*int32
	namesFunctions  []bool
	groups          []parentGroup
}

// parentGroup is the tasks of a batch (their indexes, in order) that name the same parents under
// the same policy; one statement enqueues them.
type parentGroup struct {
	after     []int64
	onFailure string
	idx       []int
}

func (c *Client) enqueueMany(ctx context.Context, db DBTX, params []EnqueueParams) ([]*EnqueueResult, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return nil, nil
	}
	n := len(params)
	b := manyBatch{types: make([]string, n), payloads: make([]string, n), namesFunctions: make([]bool, n)}
	validType := ""
	for i, p := range params {
		row, err := c.prepare(p.Args, p.Opts, validType)
		if err != nil {
			return nil, fmt.Errorf("task %d of %d: %w", i+1, n, err)
		}
		if row.debounceKey != "" {
			return nil, fmt.Errorf("task %d of %d: %w", i+1, n, inputErrorf("EnqueueMany does not debounce: enqueue debounced tasks with Enqueue"))
		}
		b.addToGroup(i, parentSet(row.after), row.onFailure)
		validType = row.taskType
		b.namesFunctions[i] = namesFunctions(row.taskType)
		row.payload = c.withTraceContext(ctx, row.payload)
		b.types[i], b.payloads[i] = row.taskType, row.payload
		// Optional columns are sent only when some task sets them.
		if row.scheduledAt != nil && b.scheduled == nil {
			b.scheduled = make([]*time.Time, n)
		}
		if b.scheduled != nil {
			b.scheduled[i] = row.scheduledAt
		}
		if row.priority != 0 && b.priorities == nil {
			b.priorities = make([]int32, n)
		}
		if b.priorities != nil {
			b.priorities[i] = row.priority
		}
		if row.key != nil && b.keys == nil {
			b.keys = make([]*string, n)
		}
		if b.keys != nil {
			b.keys[i] = row.key
		}
		if row.maxAttempts != nil && b.maxAttempts == nil {
			b.maxAttempts = make([]*int32, n)
		}
		if b.maxAttempts != nil {
			b.maxAttempts[i] = row.maxAttempts
		}
	}
	// One allocation for the results; the slice holds pointers into it.
	results := make([]EnqueueResult, n)
	if len(b.groups) == 1 {
		if err := b.insertGroup(ctx, db, b.groups[0], results); err != nil {
			return nil, err
		}
	} else {
		// Several statements: one transaction (a savepoint in the caller's), so that either
		// every task is enqueued or none is.
		beginner, ok := db.(interface {
			Begin(context.Context) (pgx.Tx, error)
		})
		if !ok {
			return nil, fmt.Errorf("enqueue %d tasks: tasks with different parents need a pool or a pgx.Tx to enqueue them in one transaction", n)
		}
		tx, err := beginner.Begin(ctx)
		if err != nil {
			return nil, fmt.Errorf("enqueue %d tasks: %w", n, mapError(err))
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		for _, g := range b.groups {
			if err := b.insertGroup(ctx, tx, g, results); err != nil {
				return nil, err
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, fmt.Errorf("enqueue %d tasks: %w", n, mapError(err))
		}
	}
	out := make([]*EnqueueResult, n)
	for i := range results {
		out[i] = &results[i]
	}
	return out, nil
}

// addToGroup puts task i in the group of its parents and policy, a new one when it is the
// first to name them.
func (b *manyBatch) addToGroup(i int, after []int64, onFailure string) {
	for k := range b.groups {
		if slices.Equal(b.groups[k].after, after) && b.groups[k].onFailure == onFailure {
			b.groups[k].idx = append(b.groups[k].idx, i)
			return
		}
	}
	b.groups = append(b.groups, parentGroup{after: after, onFailure: onFailure, idx: []int{i}})
}

// insertGroup enqueues group g's tasks in one statement and writes their results at their
// indexes in results.
func (b *manyBatch) insertGroup(ctx context.Context, db DBTX, g parentGroup, results []EnqueueResult) error {
	n := len(b.types)
	whole := len(g.idx) == n
	types, payloads := pick(b.types, g.idx, whole), pick(b.payloads, g.idx, whole)
	scheduled, priorities, keys, maxAttempts := pick(b.scheduled, g.idx, whole), pick(b.priorities, g.idx, whole),
		pick(b.keys, g.idx, whole), pick(b.maxAttempts, g.idx, whole)
	functions := false
	for _, i := range g.idx {
		functions = functions || b.namesFunctions[i]
	}
	var rows pgx.Rows
	var err error
	switch {
	case g.after != nil && functions:
		rows, err = db.Query(ctx, enqueueManyAfterSQL, types, payloads, scheduled, priorities, keys, maxAttempts, g.after, g.onFailure)
	case g.after != nil:
		rows, err = db.Query(ctx, insertTasksAfterSQL, types, payloads, scheduled, priorities, keys, maxAttempts, g.after, g.onFailure)
	case functions:
		rows, err = db.Query(ctx, enqueueManySQL, types, payloads, scheduled, priorities, keys, maxAttempts)
	default:
		rows, err = db.Query(ctx, insertTasksSQL, types, payloads, scheduled, priorities, keys, maxAttempts)
	}
	if err != nil {
		return fmt.Errorf("enqueue %d tasks: %w", n, withoutLabel(mapError(err), "enqueue_many: "))
	}
	k := 0
	var r EnqueueResult
	_, err = pgx.ForEachRow(rows, []any{&r.TaskID, &r.Duplicate}, func() error {
		if k < len(g.idx) {
			results[g.idx[k]] = r
		}
		k++
		return nil
	})
	if err != nil {
		return fmt.Errorf("enqueue %d tasks: %w", n, mapError(err))
	}
	if k != len(g.idx) {
		return fmt.Errorf("enqueue %d tasks: the database returned %d results for %d tasks", n, k, len(g.idx))
	}
	return nil
}

// pick returns the elements of col at idx (col itself when whole; nil when col is nil: the
// column is not sent).
func pick[T any](col []T, idx []int, whole bool) []T {
	if col == nil || whole {
		return col
	}
	out := make([]T, len(idx))
	for k, i := range idx {
		out[k] = col[i]
	}
	return out
}

// withoutLabel drops the label the SQL function put before its message ("enqueue: payload
// is..."), which the Go error's own context already says ("enqueue report: payload is...").
func withoutLabel(err error, labels ...string) error {
	ie, ok := err.(*InputError)
	if !ok {
		return err
	}
	for _, l := range labels {
		if strings.HasPrefix(ie.Msg, l) {
			return &InputError{Msg: strings.TrimPrefix(ie.Msg, l)}
		}
	}
	return err
}
