package taskorch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/internal/worker"
)

// A durable workflow is a Go handler whose progress is checkpointed in PostgreSQL, under the
// task's lease, one row per durable call it completes (queues.workflow_step). When it runs again
// (after a crash, a failed attempt or a sleep), it runs from the top, and every durable call that
// completed before returns its recorded result at once instead of running. docs/workflows.md,
// "Durable workflows in Go", has the rules; they are short:
//
//   - Make the durable calls (Step, StepTx, Sleep, AwaitSignal, Spawn, Await, Version) from the workflow's goroutine, in an
//     order that depends only on the args and on what earlier durable calls returned.
//   - Give each call site its own name. A run that reaches a different call at a position than the
//     one recorded there fails for good with ErrNondeterministic, naming both.
//   - Step results go through JSON, on the first run as on a replay, so both see the same value.

// ErrNondeterministic is matched (errors.Is) by the failure of a workflow whose code reached a
// different durable call at a position than the one recorded there: its code changed under it,
// or depends on something other than its args and earlier calls' results. The task fails without
// retry; retrying it by hand after a fix replays it from the start. Version lets code change under
// workflows in flight.
var ErrNondeterministic = errors.New("workflow code changed under a running workflow")

// ErrSuspended is returned by Sleep, AwaitSignal and Await when they end the run, and by every durable
// call made after that: the run is over, and the workflow's function should return. Whatever it
// returns then, the task runs again when the sleep ends (or the signal comes, or its wait times
// out, or the tasks it waits for end).
var ErrSuspended = errors.New("the workflow's run is suspended")

// DefaultVersion is what Version returns where a workflow passed before the Version call was in
// its code.
const DefaultVersion = 0

// A durable call whose checkpoint the database refuses because the task's lease is no longer
// this run's (it expired and another worker took the task, or the task was cancelled) returns an
// error matching ErrLeaseLost: nothing of the call was recorded, and the run's outcome will be
// refused too.

// Workflow is a durable workflow's run, given to the function AddWorkflow registers. Its methods
// and the functions that take it (Step, StepTx, AwaitSignal, Spawn) are the durable calls; a Workflow is valid only
// during the call of that function.
type Workflow struct {
	ctx   context.Context
	task  *Task
	lease int64
	db    *pgxpool.Pool
	cp    *worker.Checkpoints // the worker's grouping of checkpoint reads and step checkpoints

	mu       sync.Mutex
	seq      int                  // the last position used
	recorded map[int]recordedCall // the checkpoints of earlier runs, by position
	skew     time.Duration        // the database's clock minus this machine's, when loaded
	suspend  *time.Duration       // set by Sleep: the run ends, and the task is due again after it
	waiting  error                // set by AwaitSignal and Await: the run ended in the database (the worker's error for it)
	failure  error                // set on nondeterminism: the task fails without retry
}

// recordedCall is a checkpoint of queues.workflow_step.
type recordedCall struct {
	kind, name string
	result     json.RawMessage
	wakeAt     *time.Time
}

// The kinds of durable calls (queues.workflow_step.kind).
const (
	callStep    = "step"
	callStepTx  = "step_tx"
	callSleep   = "sleep"
	callVersion = "version"
	callWait    = "signal_wait"
	callSignal  = "signal"
	callSpawn   = "spawn"
	callAwait   = "await"
)

// maxWorkflowCalls bounds the durable calls of one workflow (queues.workflow_step.seq).
const maxWorkflowCalls = 100_000

// Task returns the workflow's task (its id, args as JSON, attempt, ...).
func (wf *Workflow) Task() *Task { return wf.task }

// AddWorkflow registers a durable workflow: the task type is T's TaskType(), the payload is
// decoded into a T (a payload that does not decode fails the task for good), and fn runs it. fn
// makes its durable calls through wf (Step, StepTx, Sleep, AwaitSignal, Spawn, Await, Version); what it returns is the
// task's outcome, as for any handler: nil completes it (SetResult sets its result), an error
// fails the attempt, and the next attempt replays the calls that completed. opts is at most one
// *HandlerOpts (see Handle); its Timeout bounds one run, not the whole workflow. See
// docs/workflows.md, "Durable workflows in Go".
func AddWorkflow[T TaskArgs](hs *Handlers, fn func(ctx context.Context, wf *Workflow, args T) error, opts ...*HandlerOpts) {
	if fn == nil {
		panic("taskorch: nil workflow function")
	}
	var zero T
	hs.Handle(zero.TaskType(), workflowHandler[T]{fn: fn}, opts...)
}

type workflowHandler[T TaskArgs] struct {
	fn func(ctx context.Context, wf *Workflow, args T) error
}

func (h workflowHandler[T]) Work(ctx context.Context, t *Task) error {
	var args T
	if err := json.Unmarshal(t.Payload, &args); err != nil {
		return Discard(fmt.Errorf("payload does not decode into %T: %w", args, err))
	}
	db, cp := worker.HandlerDBFrom(ctx), worker.CheckpointsFrom(ctx)
	if db == nil || cp == nil || t.LeaseID == nil {
		return Discard(errors.New("a durable workflow runs only in a taskorch worker (its checkpoints are written under the task's lease)"))
	}
	wf := &Workflow{ctx: ctx, task: t, lease: *t.LeaseID, db: db, cp: cp}
	if err := wf.load(ctx); err != nil {
		return fmt.Errorf("reading the workflow's checkpoints: %w", err)
	}
	err := h.fn(ctx, wf, args)
	wf.mu.Lock()
	defer wf.mu.Unlock()
	switch {
	case wf.failure != nil:
		return Discard(wf.failure)
	case wf.waiting != nil:
		return wf.waiting
	case wf.suspend != nil:
		return Snooze(*wf.suspend)
	}
	return err
}

// load reads the checkpoints of earlier runs, and the database's clock.
func (wf *Workflow) load(ctx context.Context) error {
	stored, err := wf.cp.Load(ctx, wf.task.ID)
	if err != nil {
		return err
	}
	wf.recorded = make(map[int]recordedCall, len(stored.Calls))
	for _, c := range stored.Calls {
		wf.recorded[c.Seq] = recordedCall{kind: c.Kind, name: c.Name, result: c.Result, wakeAt: c.WakeAt}
	}
	if !stored.ReadAt.IsZero() {
		wf.skew = time.Until(stored.ReadAt)
	}
	return nil
}

// next takes the next position for a call of kind named name and returns what was recorded there
// (nil: nothing, the call runs). A run that was suspended or failed makes no more calls.
func (wf *Workflow) next(kind, name string) (int, *recordedCall, error) {
	switch {
	case wf.failure != nil:
		return 0, nil, wf.failure
	case wf.suspend != nil || wf.waiting != nil:
		return 0, nil, ErrSuspended
	case name == "" || len(name) > 200:
		return 0, nil, inputErrorf("a durable call's name must be 1 to 200 bytes, got %q", name)
	case wf.seq >= maxWorkflowCalls:
		return 0, nil, inputErrorf("a workflow makes at most %d durable calls", maxWorkflowCalls)
	}
	wf.seq++
	rec, ok := wf.recorded[wf.seq]
	if !ok {
		return wf.seq, nil, nil
	}
	if rec.kind != kind || rec.name != name {
		wf.failure = fmt.Errorf("%w: call %d was recorded as %s %q, the code now calls %s %q (docs/workflows.md, \"Changing a workflow's code\")",
			ErrNondeterministic, wf.seq, rec.kind, rec.name, kind, name)
		return 0, nil, wf.failure
	}
	return wf.seq, &rec, nil
}

// record writes the checkpoint of the call at seq, under the lease, in tx when it is not nil.
func (wf *Workflow) record(ctx context.Context, q worker.Querier, seq int, kind, name string, result json.RawMessage,
	sleep *time.Duration, started time.Time) (*time.Time, error) {
	var sleepArg any
	if sleep != nil {
		sleepArg = sleep.String()
	}
	var ok bool
	var wake *time.Time
	err := q.QueryRow(ctx, `select recorded, wake_at from queues.record_workflow_step($1, $2, $3, $4, $5, $6, $7::interval, $8)`,
		wf.task.ID, wf.lease, seq, kind, name, result, sleepArg, started).Scan(&ok, &wake)
	if err != nil {
		return nil, fmt.Errorf("recording %s %q: %w", kind, name, mapError(err))
	}
	if !ok {
		return nil, fmt.Errorf("%s %q: %w", kind, name, ErrLeaseLost)
	}
	return wake, nil
}

// stopped returns err, or, when err is the run's context ending, that with the reason the worker
// stopped the run (ErrLeaseLost: another worker has the task; ErrTaskCancelled), so a durable
// call the worker cut short says why rather than "context canceled".
func (wf *Workflow) stopped(err error) error {
	if err == nil || wf.ctx.Err() == nil || !errors.Is(err, wf.ctx.Err()) {
		return err
	}
	if cause := context.Cause(wf.ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// stepKeyKey is the context key of StepKey.
type stepKeyKey struct{}

// StepKey returns the idempotency key of the step whose context ctx is: the same every time the
// step runs (its task and position), for a provider that deduplicates calls by key, so a step
// that ran but crashed before its checkpoint does not act twice. "" outside a step.
func StepKey(ctx context.Context) string {
	k, _ := ctx.Value(stepKeyKey{}).(string)
	return k
}

// Step runs fn as the workflow's next durable call, named name, and returns its result: on a
// later run it returns the recorded result without running fn. A step runs at least once: if the
// worker dies after fn returned and before its checkpoint committed, fn runs again, with the same
// StepKey. fn's result is returned as JSON decodes it, on the first run as on a replay. An error
// from fn is returned as it is and nothing is recorded: return it to fail the attempt, and the
// next attempt runs the step again.
func Step[R any](wf *Workflow, name string, fn func(ctx context.Context) (R, error)) (R, error) {
	var zero R
	wf.mu.Lock()
	defer wf.mu.Unlock()
	seq, rec, err := wf.next(callStep, name)
	if err != nil {
		return zero, err
	}
	if rec != nil {
		return decodeStepResult[R](rec.result, name)
	}
	started := time.Now()
	r, err := fn(context.WithValue(wf.ctx, stepKeyKey{}, fmt.Sprintf("taskorch:%d:%d", wf.task.ID, seq)))
	if err != nil {
		return zero, err
	}
	b, err := encodeStepResult(r, name)
	if err != nil {
		return zero, err
	}
	ok, err := wf.cp.Record(wf.ctx, worker.Checkpoint{TaskID: wf.task.ID, LeaseID: wf.lease, Seq: seq, Name: name, Result: b, StartedAt: started})
	if err != nil {
		return zero, fmt.Errorf("recording %s %q: %w", callStep, name, wf.stopped(mapError(err)))
	}
	if !ok {
		return zero, fmt.Errorf("%s %q: %w", callStep, name, ErrLeaseLost)
	}
	return decodeStepResult[R](b, name)
}

// StepTx runs fn as the workflow's next durable call, named name, in a transaction of the
// worker's database that holds the task's lease, and records its checkpoint in that same
// transaction: the application's writes in tx and the checkpoint commit together, exactly once.
// A worker whose lease was lost meanwhile (it expired and another worker took the task) has its
// transaction refused whole: ErrLeaseLost, nothing written. On a later run it returns the
// recorded result without running fn. An error from fn rolls the transaction back and is
// returned as it is.
func StepTx[R any](wf *Workflow, name string, fn func(ctx context.Context, tx pgx.Tx) (R, error)) (R, error) {
	var zero R
	wf.mu.Lock()
	defer wf.mu.Unlock()
	seq, rec, err := wf.next(callStepTx, name)
	if err != nil {
		return zero, err
	}
	if rec != nil {
		return decodeStepResult[R](rec.result, name)
	}
	ctx := context.WithValue(wf.ctx, stepKeyKey{}, fmt.Sprintf("taskorch:%d:%d", wf.task.ID, seq))
	started := time.Now()
	var b json.RawMessage
	err = pgx.BeginFunc(ctx, wf.db, func(tx pgx.Tx) error {
		held, err := worker.LockLease(ctx, tx, wf.task.ID, wf.lease)
		if err != nil {
			return err
		}
		if !held {
			return fmt.Errorf("step %q: %w", name, ErrLeaseLost)
		}
		r, err := fn(ctx, tx)
		if err != nil {
			return err
		}
		if b, err = encodeStepResult(r, name); err != nil {
			return err
		}
		_, err = wf.record(ctx, tx, seq, callStepTx, name, b, nil, started)
		return err
	})
	if err != nil {
		return zero, wf.stopped(err)
	}
	return decodeStepResult[R](b, name)
}

// Sleep suspends the workflow for d, named name: the first time, it records the wake time
// (the database's clock plus d) and returns ErrSuspended, which the workflow's function should
// return; the run ends without holding a slot or spending an attempt, and the task is due again
// at the wake time. On the runs after it returns nil once the wake time has passed (and
// ErrSuspended again, for what is left, if the task ran early: retried by hand, say).
func (wf *Workflow) Sleep(name string, d time.Duration) error {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if d < 0 {
		return inputErrorf("sleep %q: the duration must not be negative, got %s", name, d)
	}
	seq, rec, err := wf.next(callSleep, name)
	if err != nil {
		return err
	}
	if rec != nil {
		if rec.wakeAt == nil {
			return nil
		}
		left := time.Until(*rec.wakeAt) - wf.skew
		if left <= 0 {
			return nil
		}
		wf.suspend = &left
		return ErrSuspended
	}
	if _, err := wf.record(wf.ctx, wf.db, seq, callSleep, name, nil, &d, time.Now()); err != nil {
		return err
	}
	if d == 0 {
		return nil
	}
	wf.suspend = &d
	return ErrSuspended
}

// Version returns the version of the code at this point of the workflow, named name, so that a
// deploy can change the code of workflows already in flight: a workflow that reaches it for the
// first time records max and gets max; one that recorded it gets what it recorded; one that had
// passed this point before the call was in the code (a different call is recorded here) gets
// DefaultVersion, and the call takes no position, so the rest of its history still lines up.
//
//	if v, _ := wf.Version("welcome-pack", 1); v >= 1 {
//		// the new code
//	} else {
//		// the code the workflows in flight were started with
//	}
func (wf *Workflow) Version(name string, max int) (int, error) {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if max < 1 {
		return 0, inputErrorf("version %q: max must be at least 1, got %d", name, max)
	}
	if rec, ok := wf.recorded[wf.seq+1]; ok && (rec.kind != callVersion || rec.name != name) && wf.failure == nil && wf.suspend == nil && wf.waiting == nil {
		return DefaultVersion, nil
	}
	seq, rec, err := wf.next(callVersion, name)
	if err != nil {
		return 0, err
	}
	if rec != nil {
		return decodeStepResult[int](rec.result, name)
	}
	b, _ := json.Marshal(max)
	if _, err := wf.record(wf.ctx, wf.db, seq, callVersion, name, b, nil, time.Now()); err != nil {
		return 0, err
	}
	return max, nil
}

// signalResult is what AwaitSignal records at its second position.
type signalResult struct {
	Received bool            `json:"received"`
	Payload  json.RawMessage `json:"payload,omitempty"`
}

// AwaitSignal waits for signal (name, key) — what queues.signal or Client.Signal records, first
// emit wins — for at most timeout from the first time the workflow reaches it, and returns its
// payload decoded into a P, with received true; received is false when the timeout passed first.
// While it waits, the run ends: it returns ErrSuspended (return it), the task is pending until
// the deadline without spending an attempt, and the signal makes it due at once. The wait's
// registration and the task's suspension are one transaction under the signal's lock, so a
// signal cannot fall between them; a signal that came before the wait is found at once. What it
// got is recorded: a signal that arrives after the timeout was recorded changes nothing.
// docs/workflows.md, "Waiting for a signal".
func AwaitSignal[P any](wf *Workflow, name, key string, timeout time.Duration) (p P, received bool, err error) {
	var zero P
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if timeout < 0 {
		return zero, false, inputErrorf("await signal %q: the timeout must not be negative, got %s", name, timeout)
	}
	seq, rec, err := wf.next(callWait, name)
	if err != nil {
		return zero, false, err
	}
	var deadline time.Time
	if rec != nil && rec.wakeAt != nil {
		deadline = *rec.wakeAt
	} else {
		keyJSON, _ := json.Marshal(map[string]string{"key": key})
		wake, err := wf.record(wf.ctx, wf.db, seq, callWait, name, keyJSON, &timeout, time.Now())
		if err != nil {
			return zero, false, err
		}
		deadline = *wake
	}
	seq, rec, err = wf.next(callSignal, name)
	if err != nil {
		return zero, false, err
	}
	var got signalResult
	if rec != nil {
		if err := json.Unmarshal(rec.result, &got); err != nil {
			return zero, false, fmt.Errorf("await signal %q: its recorded result does not decode: %w", name, err)
		}
	} else {
		var outcome string
		err := wf.db.QueryRow(wf.ctx, `select outcome, payload from queues.await_workflow_signal($1, $2, $3, $4, $5, $6)`,
			wf.task.ID, wf.lease, seq, name, key, deadline).Scan(&outcome, &got.Payload)
		if err != nil {
			return zero, false, fmt.Errorf("await signal %q: %w", name, mapError(err))
		}
		switch outcome {
		case "received":
			got.Received = true
		case "timed_out":
		case "waiting":
			wf.waiting = worker.ErrSuspendedInDatabase
			return zero, false, ErrSuspended
		default:
			return zero, false, fmt.Errorf("await signal %q: %w", name, ErrLeaseLost)
		}
	}
	if !got.Received {
		return zero, false, nil
	}
	p, err = decodeStepResult[P](got.Payload, name)
	return p, err == nil, err
}

// spawnResult is what Spawn records.
type spawnResult struct {
	TaskID int64 `json:"task_id"`
}

// Spawn enqueues a task as the workflow's next durable call, named name, and returns its id: the
// task and the checkpoint that records its id commit in one transaction under the lease, so the
// task is enqueued once however often the workflow runs again, and a later run gets the same id.
// args is a Go task type's (a type that names a function, db_function or a channel, is
// ErrInvalidInput: start a process with its kickoff in a StepTx instead); opts may set
// ScheduledAt, Priority and MaxAttempts (an idempotency or debounce key, or After, is
// ErrInvalidInput: the checkpoint is the idempotency). docs/workflows.md, "Enqueueing tasks once".
func Spawn(wf *Workflow, name string, args TaskArgs, opts *EnqueueOpts) (taskID int64, err error) {
	row, err := (&Client{}).prepare(args, opts, "")
	if err != nil {
		return 0, fmt.Errorf("spawn %q: %w", name, err)
	}
	switch {
	case row.key != nil || row.debounceKey != "" || len(row.after) > 0:
		return 0, inputErrorf("spawn %q: a spawned task takes no idempotency key, debounce key or After (its checkpoint enqueues it once)", name)
	case namesFunctions(row.taskType):
		return 0, inputErrorf("spawn %q: task type %s names a function; a workflow spawns tasks of Go types (start a process with its kickoff, in a StepTx)", name, row.taskType)
	}
	wf.mu.Lock()
	defer wf.mu.Unlock()
	seq, rec, err := wf.next(callSpawn, name)
	if err != nil {
		return 0, err
	}
	if rec != nil {
		r, err := decodeStepResult[spawnResult](rec.result, name)
		return r.TaskID, err
	}
	var outcome string
	var id *int64
	err = wf.db.QueryRow(wf.ctx, `select outcome, spawned_task_id from queues.spawn_workflow_task($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9)`,
		wf.task.ID, wf.lease, seq, name, row.taskType, row.payload, row.scheduledAt, row.priority, row.maxAttempts).Scan(&outcome, &id)
	if err != nil {
		return 0, fmt.Errorf("spawn %q: %w", name, mapError(err))
	}
	if outcome != "spawned" || id == nil {
		return 0, fmt.Errorf("spawn %q: %w", name, ErrLeaseLost)
	}
	return *id, nil
}

// awaitResult is what Await records: each task's status when the last one ended.
type awaitResult struct {
	Tasks []struct {
		ID     int64  `json:"task_id"`
		Status Status `json:"status"`
	} `json:"tasks"`
}

// Await waits, as the workflow's next durable call named name, until every task of taskIDs has
// ended — completed, failed, dead or cancelled — and returns them in id order (duplicates
// collapsed), each with its ID, Type, Status as it ended and Result (nil when it has none, or
// was deleted since). While some have not ended, the run ends: it returns ErrSuspended (return
// it), and the workflow's task waits for them without a slot, a connection or an attempt, as a
// task enqueued after them does (under the policy run: a failed one releases it too); the end of
// the last one makes it due in that task's own transaction. The statuses are recorded once all
// have ended, so a replay returns the same. An id no task has, the workflow's own, or none is
// ErrInvalidInput. docs/workflows.md, "Waiting for tasks".
func (wf *Workflow) Await(name string, taskIDs ...int64) ([]*Task, error) {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if len(taskIDs) == 0 {
		return nil, inputErrorf("await %q: no task to wait for", name)
	}
	seq, rec, err := wf.next(callAwait, name)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if rec != nil {
		raw = rec.result
	} else {
		var outcome string
		var statuses json.RawMessage
		err := wf.db.QueryRow(wf.ctx, `select outcome, statuses from queues.await_workflow_tasks($1, $2, $3, $4, $5)`,
			wf.task.ID, wf.lease, seq, name, taskIDs).Scan(&outcome, &statuses)
		if err != nil {
			return nil, fmt.Errorf("await %q: %w", name, mapError(err))
		}
		switch outcome {
		case "done":
			raw, _ = json.Marshal(map[string]json.RawMessage{"tasks": statuses})
		case "waiting":
			wf.waiting = worker.ErrWaitingInDatabase
			return nil, ErrSuspended
		default:
			return nil, fmt.Errorf("await %q: %w", name, ErrLeaseLost)
		}
	}
	got, err := decodeStepResult[awaitResult](raw, name)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(got.Tasks))
	out := make([]*Task, len(got.Tasks))
	byID := make(map[int64]*Task, len(got.Tasks))
	for i, t := range got.Tasks {
		ids[i] = t.ID
		out[i] = &Task{ID: t.ID, Status: t.Status}
		byID[t.ID] = out[i]
	}
	// The results of tasks that ended do not change; a task deleted since has none.
	rows, err := wf.db.Query(wf.ctx, `select task_id, task_type, result from queues.task where task_id = any ($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("await %q: reading the tasks' results: %w", name, mapError(err))
	}
	var id int64
	var typ string
	var result json.RawMessage
	_, err = pgx.ForEachRow(rows, []any{&id, &typ, &result}, func() error {
		if t := byID[id]; t != nil {
			t.Type, t.Result = typ, result
		}
		result = nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("await %q: reading the tasks' results: %w", name, mapError(err))
	}
	return out, nil
}

// encodeStepResult marshals a step's result.
func encodeStepResult(r any, name string) (json.RawMessage, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, inputErrorf("step %q: its result does not marshal to JSON: %v", name, err)
	}
	return b, nil
}

// decodeStepResult unmarshals a step's recorded result.
func decodeStepResult[R any](b json.RawMessage, name string) (R, error) {
	var r R
	if len(b) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("step %q: its recorded result does not decode into %T: %w", name, r, err)
	}
	return r, nil
}
