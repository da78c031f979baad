package tasktype

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Observer watches a worker: the tasks it runs and what happens to it. It is how metrics and
// traces reach a program without the worker linking a metrics or tracing library: the
// Prometheus metrics of docs/operations.md are an Observer (package
// github.com/taskorch/taskorch/contrib/prometheus), the OpenTelemetry spans another
// (github.com/taskorch/taskorch/contrib/otel). Give them in WorkerConfig.Observers.
//
// The worker calls the methods from its own goroutines, concurrently: they must be safe for
// concurrent use and return quickly (no I/O). Embed ObserverDefaults to implement only some.
type Observer interface {
	// Attach is called once by NewWorker, before the worker runs, with the worker it observes.
	// An error fails NewWorker (for example, metrics whose names a registry holds already).
	Attach(w WorkerInfo) error

	// TaskStarted is called when a claimed task starts, before its handler runs, on the task's
	// context. It returns the context the task runs on: a tracer starts the task's span in it.
	TaskStarted(ctx context.Context, t *Task) context.Context

	// TaskFinished is called once for every task TaskStarted saw, once its outcome is
	// committed, refused, or known to be lost: never before. ctx is the one TaskStarted
	// returned (its span ends here).
	TaskFinished(ctx context.Context, t *Task, f TaskFinish)

	// WorkerEvent is called for what happens to the worker rather than to one task's run.
	WorkerEvent(e WorkerEvent)
}

// QueueObserver is an Observer that also wants the queues' depth: while the worker leads, it
// samples queues.queue_stats() every WorkerConfig.QueueStatsInterval and passes the rows (nil
// while it does not lead: another worker reports them). A worker none of whose observers is a
// QueueObserver does not sample.
type QueueObserver interface {
	Observer
	QueueStats(stats []QueueStat)
}

// HealthObserver is a QueueObserver that also wants what the leader samples for the alerts
// beside the queues' depth (queues.health_stats()): with each queue sample while the worker
// leads, HealthStats gets the sample; nil while it does not lead.
type HealthObserver interface {
	QueueObserver
	HealthStats(h *HealthStats)
}

// HealthStats is one sample of queues.health_stats(), taken by the leader.
type HealthStats struct {
	// Paused are the task types whose queue is paused (queues.queue_pause).
	Paused []string
	// DefaultPartitionRows is how many rows the history's default partition
	// (queues.task_event_default) holds, counted up to 10,000: 0 while the leader makes each
	// day's partition ahead (docs/operations.md, "Task history").
	DefaultPartitionRows int64
	// ProcessesFailed is, per registered business process, how many of its instances failed in
	// the last hour (their terminal failed fact), counted up to 10,000.
	ProcessesFailed map[string]int64
}

// ObserverDefaults implements every method of Observer as doing nothing. Embed it in an
// observer to implement only the methods it needs.
type ObserverDefaults struct{}

// Attach does nothing.
func (ObserverDefaults) Attach(WorkerInfo) error { return nil }

// TaskStarted returns ctx.
func (ObserverDefaults) TaskStarted(ctx context.Context, _ *Task) context.Context { return ctx }

// TaskFinished does nothing.
func (ObserverDefaults) TaskFinished(context.Context, *Task, TaskFinish) {}

// WorkerEvent does nothing.
func (ObserverDefaults) WorkerEvent(WorkerEvent) {}

// WorkerInfo is the worker an Observer is attached to.
type WorkerInfo struct {
	// ID is the worker's id (WorkerConfig.ID, or the one made for it).
	ID string
	// Pool is the worker's connection pool, for its statistics.
	Pool *pgxpool.Pool
	// Transport is the name of the worker's transport (WorkerConfig.Transport): "" when tasks
	// come from PostgreSQL alone.
	Transport string
	// TaskTypes are the task types the worker handles: its Go handlers' and its channels' (a
	// channel whose provider it has). An observer makes their per-type series from the start,
	// so that the first event of each type after a restart is an increase.
	TaskTypes []string
	// Channels are those of TaskTypes that are channel tasks (email, sms, file_delete: a provider
	// call wrapped in SQL handlers).
	Channels []string
	// LongestRunning reports, for each task type with attempts running on the worker now, how
	// long the longest of them has run (taskorch_task_running_longest_seconds). Nil outside a
	// worker.
	LongestRunning func() map[string]time.Duration
}

// Outcome is what became of one run of a task, as TaskFinished reports it.
type Outcome uint8

// The outcomes of a run.
const (
	// OutcomeCompleted: the task's completion is committed (TaskFinish.Status: completed).
	OutcomeCompleted Outcome = iota + 1
	// OutcomeFailed: the attempt's failure is committed; TaskFinish.Status says what follows:
	// pending (retried later), failed (not retriable) or dead (out of attempts).
	OutcomeFailed
	// OutcomeSnoozed: the handler asked to run again later; committed, the attempt not spent.
	OutcomeSnoozed
	// OutcomeRefused: the database refused the outcome: the lease was lost meanwhile (cancelled,
	// or expired and taken over). Nothing was written.
	OutcomeRefused
	// OutcomeLeaseLost: the lease was found gone before the task's transaction began; nothing
	// was done.
	OutcomeLeaseLost
	// OutcomeStopped: the worker stopped the task without an outcome (its lease was lost while
	// it ran, or the worker shut down; a shut-down worker gives it back).
	OutcomeStopped
	// OutcomeUnrecorded: the outcome could not be written (the database unreachable past the
	// retries); the lease will expire and the task run again.
	OutcomeUnrecorded
)

var outcomeNames = [...]string{"", "completed", "failed", "snoozed", "refused", "lease_lost", "stopped", "unrecorded"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return "unknown"
}

// TaskFinish is what TaskFinished reports about one run.
type TaskFinish struct {
	Outcome Outcome
	// Status is the task's status after the write: completed, pending (a retry, a snooze),
	// failed or dead; "" when nothing was written.
	Status Status
	// Duration is how long the run took on the worker, from its start to its outcome.
	Duration time.Duration
	// Error, when the attempt failed (the outcome written or not, and for a channel task whose
	// call failed although the task completed, its error handler having recorded the failure),
	// is the failure's message; "" otherwise.
	Error string
	// Retriable, with Error: whether the failure is retried at task level.
	Retriable bool
	// ProviderRefused, for a channel task, is set when its provider refused the call for good
	// (retrying cannot succeed: a bounce, an invalid number): the task completed with its error
	// handler recording the failure, or, without handlers, failed. It is set once the outcome
	// is committed.
	ProviderRefused bool
}

// WorkerEventKind says what happened to a worker; see WorkerEvent.
type WorkerEventKind uint8

// The kinds of WorkerEvent, with the fields each sets.
const (
	// EventLeaseLost: a task's lease was found gone (cancelled, or expired and taken over)
	// while it ran or waited in the claim-ahead buffer; it was stopped, or not started.
	EventLeaseLost WorkerEventKind = iota + 1
	// EventNotified: a NOTIFY wake-up arrived on the LISTEN connection.
	EventNotified
	// EventElected: this worker became the leader.
	EventElected
	// EventDeposed: this worker is no longer the leader.
	EventDeposed
	// EventReaped: as leader, the worker removed Workers dead workers and returned Tasks of
	// their running tasks to pending.
	EventReaped
	// EventSessionLost: the worker's session connection was lost; it opens another.
	EventSessionLost
	// EventPruned: as leader, the worker deleted Tasks finished tasks (retention).
	EventPruned
	// EventScheduled: as leader, the worker enqueued one periodic schedule tick (or found it
	// enqueued); Late when it did so late, catching the tick up after a handover or an outage
	// (docs/operations.md, "Periodic schedules").
	EventScheduled
	// EventTicksMissed: as leader, the worker skipped N ticks of a schedule, older than the
	// catch-up window when it found them; they are never enqueued.
	EventTicksMissed
	// EventMaintenanceError: the maintenance operation Op failed; it is retried at its next
	// interval. Op is one of register, session, heartbeat, leadership, reap, session_reap,
	// prune, history, schedule, resign, deregister, queue_stats.
	EventMaintenanceError
	// EventMessagesSent: the transport's dispatcher sent N task ids (redispatches included).
	EventMessagesSent
	// EventMessagesReceived: N messages arrived from the transport.
	EventMessagesReceived
	// EventMessagesAcked: N messages were acknowledged (after their task's outcome was
	// committed, or after their claim was refused).
	EventMessagesAcked
	// EventMessagesRefused: N received messages named tasks that could not be claimed: they
	// were acknowledged and dropped.
	EventMessagesRefused
	// EventMessagesRedispatched: N task ids were sent again (a lost message, or after an outage).
	EventMessagesRedispatched
	// EventSendFailed: N task ids could not be sent; their tasks stayed eligible.
	EventSendFailed
	// EventFallback: the transport became unreachable (On) and the worker claims from
	// PostgreSQL, or it is back (On false).
	EventFallback
	// EventRunningLong: task Task has run longer than its type's warning threshold
	// (HandlerOpts.WarnAfter, WorkerConfig.WarnRunningAfter); reported once per attempt.
	EventRunningLong
	// EventQuiet: an operator quieted this worker (On; queues.quiet_worker): it finishes the
	// tasks it runs and claims nothing more; or resumed it (On false).
	EventQuiet
	// EventTasksDead: as leader, the worker found N tasks of TaskType gone dead without a worker
	// recording it: their lease expired on their last attempt, or their worker was found dead
	// (queues.take_dead_tally). The tasks a worker fails on their last attempt are reported by
	// TaskFinished instead.
	EventTasksDead
)

// WorkerEvent is something that happened to a worker. Kind says which fields are set.
type WorkerEvent struct {
	Kind    WorkerEventKind
	N       int    // the EventMessages* kinds, EventSendFailed, EventTicksMissed, EventTasksDead: how many
	Workers int    // EventReaped: workers removed
	Tasks   int    // EventReaped: tasks recovered; EventPruned: tasks deleted
	Op      string // EventMaintenanceError: the operation
	On      bool   // EventFallback: the transport is unreachable; EventQuiet: the worker is quiet
	Late    bool   // EventScheduled: the tick was enqueued late (caught up)
	Err     error  // EventMaintenanceError, EventSessionLost
	// TaskType is the task type of EventTasksDead.
	TaskType string
	Task     *Task // EventRunningLong: the task (do not keep it)
}

// QueueStat is one row of queues.queue_stats(): the waiting, pending or running tasks of one
// queue.
type QueueStat struct {
	// TaskType is the queue: a task type, or db_function:<schema.function> for one SQL
	// function's db_function tasks (the name queues.pause_queue and queues.set_limit take).
	TaskType string
	Status   string
	Tasks    int64
	// OldestAge is how long the longest-waiting due pending task has waited, in seconds
	// (database clock).
	OldestAge float64
	// Due is how many pending tasks are due (their run_at has come).
	Due int64
	// Workers is how many registered workers claim the type (db_function, for a function's
	// queue: such a worker serves every function).
	Workers int64
}
