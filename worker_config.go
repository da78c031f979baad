package taskorch

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/dispatch"
	"github.com/taskorch/taskorch/internal/maintenance"
	"github.com/taskorch/taskorch/internal/worker"
	"github.com/taskorch/taskorch/transport"
)

// WorkerConfig configures a Worker. The zero value is valid; each field's comment gives its
// default. The taskorch command sets these from environment variables (docs/configuration.md).
type WorkerConfig struct {
	// ID names this worker in leases, events and the workers table. Defaults to
	// hostname-pid-random.
	ID string

	// Concurrency is how many tasks run at once. Defaults to 10.
	Concurrency int

	// FetchBatch caps how many tasks one claim statement takes. Defaults to Concurrency +
	// ClaimAhead, at most 1,000 (or Concurrency, if that is more).
	FetchBatch int

	// ClaimAhead caps how many tasks the worker claims ahead of its free slots, into a local
	// buffer from which a slot that frees takes its next task at once (docs/worker.md,
	// "Claiming ahead"). The buffer holds about what the slots finish in six claim round trips,
	// never more than this; its tasks' leases are renewed like running tasks', and a task that
	// waits there a whole renewal period (LeaseDuration/3) is given back to pending. Negative
	// turns claiming ahead off: claims take only free slots. Defaults to 4 × Concurrency, at
	// least 2,000 (the cap matters only for tasks that take less than a claim's round trip).
	ClaimAhead int

	// LeaseDuration is how long a claim holds a task. The worker renews the leases of running
	// tasks every LeaseDuration/3, so long tasks keep theirs; a crashed worker's tasks become
	// claimable again once it expires. Defaults to 5 minutes.
	LeaseDuration time.Duration

	// TaskTimeout bounds one attempt: its context is cancelled and the attempt fails (and is
	// retried). Zero means no bound beyond the lease. Defaults to 0.
	TaskTimeout time.Duration

	// WarnRunningAfter: a task still running after this long is logged as a warning, once per
	// attempt ("task running longer than expected", with its id, type and how long it has run),
	// and reported to the observers (taskorch_tasks_running_long_total), so a stuck handler shows
	// before its lease or timeout ends it (docs/operations.md, "Find a stuck task"). Zero means
	// no warning. HandlerOpts.WarnAfter, then WarnRunningAfterTypes, override it per type.
	WarnRunningAfter time.Duration

	// WarnRunningAfterTypes overrides WarnRunningAfter for the task types named, including those
	// without a Go handler (db_function, the channel types, a process's types); a negative
	// duration means no warning for the type. A Go handler's HandlerOpts.WarnAfter wins over
	// both.
	WarnRunningAfterTypes map[string]time.Duration

	// PollInterval is the shortest wait between claims while idle; the wait doubles up to
	// MaxPollInterval while nothing comes, and a NOTIFY cuts it short. Defaults to 100ms.
	PollInterval time.Duration

	// MaxPollInterval: see PollInterval. Defaults to 2s.
	MaxPollInterval time.Duration

	// PollOnly turns LISTEN/NOTIFY off and relies on polling alone: for connections through a
	// transaction-pooling proxy (PgBouncer in transaction mode), which cannot hold a LISTEN.
	// The worker keeps no session state then. Defaults to false.
	PollOnly bool

	// ListenConfig, when set, is a direct connection to PostgreSQL (not through a pooler) that
	// the worker holds for LISTEN, while all its work goes through the pool: for a pool behind a
	// transaction-pooling proxy, with the wake-up latency of LISTEN/NOTIFY. Before the worker
	// starts, it checks that a NOTIFY sent through the pool arrives on this connection, and
	// refuses to start if it does not (a URL through a transaction pooler; another server).
	// Excludes PollOnly. See docs/operations.md, "Production topology".
	ListenConfig *pgx.ConnConfig

	// ShutdownGrace is how long a stopping worker lets running tasks finish before it cancels
	// them and gives them back to pending. Defaults to 30s.
	ShutdownGrace time.Duration

	// Handlers are the Go handlers, by task type. The worker claims tasks of these types (and
	// records them in queues.worker): register every handler before NewWorker.
	Handlers *Handlers

	// MaxResultBytes bounds the JSON size of one task's result (SetResult, AddHandlerWithResult,
	// a db_function envelope's payload): a task whose result is larger fails, without retry, with
	// a message naming the sizes; the result is not stored, not even in part. Defaults to 1 MiB,
	// as ClientConfig.MaxPayloadBytes. Negative means no bound here; the database's hard limit of
	// 8 MiB per task holds whatever this is (docs/sql.md, "Results and waiting").
	MaxResultBytes int

	// Channels are the providers of the channel task types (email, sms, file_delete), by type.
	// The worker claims the tasks of a channel only when it has a provider for it (a nil one
	// counts as none): without one the channel is off on this worker, and its tasks stay
	// pending for a worker that has one.
	Channels map[string]ChannelProvider

	// ClaimUnknownTypes makes the worker claim every task type, and fail the tasks it cannot run
	// (a type without a Go handler, a channel without a provider) instead of leaving them
	// pending for a worker that can run them. It is recorded in queues.worker as serving every
	// type. Defaults to false: the worker claims only the types it can run, db_function, its Go
	// handlers' types and its channels' types (docs/worker.md, "Which tasks a worker claims").
	ClaimUnknownTypes bool

	// Deprecated: a worker claims only the types it can run unless ClaimUnknownTypes is set;
	// this field has no effect.
	OnlyKnownTypes bool

	// Logger receives structured logs; every line about a task carries task_id, task_type,
	// lease_id and worker_id. Defaults to slog.Default().
	Logger *slog.Logger

	// Version is recorded in the workers table. Defaults to "dev".
	Version string

	// HeartbeatInterval is how often the worker updates its row in queues.worker (one write per
	// interval, none per task). Defaults to 5s.
	HeartbeatInterval time.Duration

	// WorkerTimeout is how long a worker may go without a heartbeat before the leader deletes
	// it and returns its running tasks to pending (the lost lease counts as an attempt). A
	// crashed worker with a session is found far sooner (SessionGrace); a stopped or
	// partitioned one keeps its session, and only its silence tells. At least twice
	// HeartbeatInterval, at most a day. Defaults to 30s.
	WorkerTimeout time.Duration

	// LeaderTTL is the leader's lease: one worker at a time leads (reaps dead workers, prunes
	// history, enqueues periodic schedules); another takes over when the lease has not been
	// renewed for this long, at once when the leader stops or its session is gone. At most an
	// hour. Defaults to 15s.
	LeaderTTL time.Duration

	// SessionGrace bounds how long the running tasks of a crashed worker wait. Unless PollOnly,
	// a worker holds a connection of its own for its life (its session: a connection of the
	// pool taken out of it, or one to ListenConfig) and registers on it; when the process dies
	// or the connection is cut, PostgreSQL ends the session, the leader sees it within 250 ms,
	// and once it has been gone for SessionGrace it returns the worker's running tasks to
	// pending (the lost lease counts as an attempt; the worker's late outcomes are refused). A
	// live worker whose connection dropped opens another at once and keeps its tasks if it is
	// back within SessionGrace. The leader's setting applies. Negative: no grace. Defaults to
	// 1s. A PollOnly worker has no session: heartbeats alone tell (docs/operations.md,
	// "Crashed workers").
	SessionGrace time.Duration

	// Retention is how long completed and cancelled tasks are kept, with their error rows,
	// before the leader deletes them. Defaults to 7 days; negative keeps them forever.
	Retention time.Duration

	// FailedRetention is the same for failed and dead tasks. Defaults to 30 days; negative keeps
	// them forever.
	FailedRetention time.Duration

	// HistoryRetention is how long the lease and event history (queues.task_lease,
	// queues.task_event) is kept: the leader drops a whole UTC day of it once the day ended more
	// than this long ago (docs/operations.md, "Retention"). Defaults to the larger of Retention
	// and FailedRetention, so a kept task keeps its history (forever when either is negative);
	// negative keeps it forever.
	HistoryRetention time.Duration

	// Observers watch the worker: the tasks it runs (each told once its outcome is committed)
	// and what happens to it (docs/operations.md, "Metrics and alerts"). The library links no
	// metrics or tracing library itself: the Prometheus metrics are
	// github.com/taskorch/taskorch/contrib/prometheus, the OpenTelemetry spans
	// github.com/taskorch/taskorch/contrib/otel, each a module of its own; or implement Observer.
	// Defaults to none: nothing is measured, at no cost.
	Observers []Observer

	// Middleware wraps every Go handler the worker runs, the first outermost: Middleware[0]
	// runs first and sees what the rest returned (docs/worker.md, "Middleware"). It runs inside
	// the attempt, around the typed handler's decoding, and sees the task; what it returns is
	// the attempt's outcome, control errors (Snooze, Discard) included, and a panic it does not
	// recover fails the attempt as a handler's does. db_function and channel tasks do not pass
	// through it: they run SQL and provider calls whose outcome is fixed by their handlers'
	// protocol, with no Go handler to wrap; Observers see every task.
	Middleware []Middleware

	// Periodic are the schedules this program declares in code (docs/worker.md, "Periodic
	// tasks declared in code"). When it is not nil, the worker, each time it becomes the
	// leader, makes the schedules declared in code exactly these, before it enqueues any tick:
	// it adds the new ones (enabled), updates those whose definition changed (a changed cron
	// starts at the first tick after now) and removes those no longer declared; their tasks
	// stay. Whether one runs stays the operator's (taskorch schedules pause|resume). A schedule
	// of the same name added by hand (AddSchedule) is left alone, with an error logged.
	// `taskorch schedules list` shows them as SOURCE code. Nil (the default) leaves every
	// schedule as it is; an empty, non-nil slice removes the schedules declared in code. One
	// program declares a database's periodic tasks: the leader of the fleet applies its own
	// list. NewWorker refuses a bad name or cron expression, a name twice, or a type that names
	// a function (db_function, the channels: add those with AddSchedule).
	Periodic []PeriodicTask

	periodic []maintenance.Periodic // Periodic, checked and encoded

	// QueueStatsInterval is how often the leader samples queue depth, the oldest pending age and
	// the types no live worker claims, per queue: per task type, and per SQL function for
	// db_function tasks (taskorch_queue_depth,
	// taskorch_oldest_pending_age_seconds, taskorch_queue_unserved) with one
	// queues.queue_stats() call, which counts waiting, pending and running tasks only. Only used when an
	// observer wants them (a tasktype.QueueObserver, as contrib/prometheus's). Defaults to 5s.
	QueueStatsInterval time.Duration

	// Transport is how task ids reach the worker (docs/transports.md). Nil, the default, claims
	// from PostgreSQL, woken by LISTEN/NOTIFY and polling. A transport made by
	// redisstream.New (Redis Streams) or sqs.New (Amazon SQS), in the packages under
	// github.com/taskorch/taskorch/transport, or one of your own, delivers the ids of due tasks,
	// which every worker on the transport also dispatches. PostgreSQL stays the only truth: a
	// received id is claimed in the database before anything runs, and while the transport is
	// unreachable the worker claims from PostgreSQL, until it is back.
	//
	// A transport serves one worker, which owns it: Run opens it (with the worker's ID and a
	// hold derived from LeaseDuration) and closes it when it returns. NewWorker refuses a nil
	// pointer in this interface and a transport named "" or "postgres".
	Transport transport.Transport

	// RedispatchAfter is how long a task may stay dispatched to the transport without being
	// claimed before it is dispatched again (its message was lost). Only used with a transport.
	// Defaults to 30s.
	RedispatchAfter time.Duration
}

func (c WorkerConfig) withDefaults() (WorkerConfig, error) {
	if c.ID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "unknown"
		}
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		c.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	for i, m := range c.Middleware {
		if m == nil {
			return c, &InputError{Msg: fmt.Sprintf("WorkerConfig.Middleware[%d] is nil", i)}
		}
	}
	c.Middleware = slices.Clone(c.Middleware)
	if c.Periodic != nil {
		p, err := periodicSchedules(c.Periodic)
		if err != nil {
			return c, err
		}
		c.periodic = p
	}
	if c.Concurrency == 0 {
		c.Concurrency = 10
	}
	if c.ClaimAhead == 0 {
		c.ClaimAhead = max(4*c.Concurrency, 2000)
	}
	if c.FetchBatch == 0 {
		c.FetchBatch = max(min(c.Concurrency+max(c.ClaimAhead, 0), 1000), c.Concurrency)
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 5 * time.Minute
	}
	if c.PollInterval == 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	if c.MaxPollInterval == 0 {
		c.MaxPollInterval = 2 * time.Second
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 30 * time.Second
	}
	if c.Handlers == nil {
		c.Handlers = NewHandlers()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.QueueStatsInterval == 0 {
		c.QueueStatsInterval = 5 * time.Second
	}
	if c.RedispatchAfter == 0 {
		c.RedispatchAfter = dispatch.DefaultRedispatchAfter
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = defaultMaxPayloadBytes
	}
	if err := c.validateTransport(); err != nil {
		return c, err
	}
	switch {
	case c.Concurrency < 1 || c.Concurrency > 10000:
		return c, inputErrorf("worker concurrency must be between 1 and 10000, got %d", c.Concurrency)
	case c.ClaimAhead > 100000:
		return c, inputErrorf("worker claim-ahead must be at most 100000, got %d", c.ClaimAhead)
	case c.FetchBatch < 1:
		return c, inputErrorf("worker fetch batch must be at least 1, got %d", c.FetchBatch)
	case c.LeaseDuration < time.Second:
		return c, inputErrorf("lease duration must be at least 1s, got %s", c.LeaseDuration)
	case c.TaskTimeout < 0:
		return c, inputErrorf("task timeout must not be negative, got %s", c.TaskTimeout)
	case c.WarnRunningAfter < 0:
		return c, inputErrorf("warn-running-after must not be negative, got %s", c.WarnRunningAfter)
	case c.PollInterval < time.Millisecond || c.MaxPollInterval < c.PollInterval:
		return c, inputErrorf("poll interval must be at least 1ms and at most the max poll interval (%s, %s)", c.PollInterval, c.MaxPollInterval)
	case c.ShutdownGrace < 0:
		return c, inputErrorf("shutdown grace must not be negative, got %s", c.ShutdownGrace)
	case c.PollOnly && c.ListenConfig != nil:
		return c, inputErrorf("PollOnly and ListenConfig exclude each other: poll only, or LISTEN on the direct connection")
	case c.QueueStatsInterval < 10*time.Millisecond:
		return c, inputErrorf("queue stats interval must be at least 10ms, got %s", c.QueueStatsInterval)
	}
	for typ, d := range c.WarnRunningAfterTypes {
		if err := ValidateTaskType(typ); err != nil {
			return c, fmt.Errorf("warn-running-after: %w", err)
		}
		if d == 0 {
			return c, inputErrorf("warn-running-after for %s must not be 0 (a duration, or a negative one for no warning)", typ)
		}
	}
	for typ := range c.Channels {
		if !worker.IsChannelType(typ) {
			return c, inputErrorf("%q is not a channel task type (want one of %v)", typ, ChannelTypes)
		}
	}
	return c, nil
}

// validateTransport checks the transport settings (without connecting): a value that would
// fail at the first message fails here.
func (c WorkerConfig) validateTransport() error {
	if c.RedispatchAfter < 10*time.Millisecond {
		return inputErrorf("redispatch-after must be at least 10ms, got %s", c.RedispatchAfter)
	}
	if c.Transport == nil {
		return nil
	}
	if v := reflect.ValueOf(c.Transport); v.Kind() == reflect.Pointer && v.IsNil() {
		return inputErrorf("worker transport is a nil %T: make it with its package's constructor (redisstream.New, sqs.New), "+
			"or leave WorkerConfig.Transport nil to claim from PostgreSQL", c.Transport)
	}
	switch name := c.Transport.Name(); name {
	case "":
		return inputErrorf("worker transport %T has an empty name", c.Transport)
	case worker.PostgresTransport:
		return inputErrorf("worker transport %T is named %q, the name of a worker without a transport: "+
			"leave WorkerConfig.Transport nil to claim from PostgreSQL", c.Transport, name)
	}
	return nil
}

// workerConfig is c, checked and with its defaults applied, as the worker's machinery takes it.
func (c WorkerConfig) workerConfig() worker.Config {
	return worker.Config{
		ID: c.ID, Concurrency: c.Concurrency, FetchBatch: c.FetchBatch, ClaimAhead: c.ClaimAhead,
		LeaseDuration: c.LeaseDuration, TaskTimeout: c.TaskTimeout,
		WarnRunningAfter: c.WarnRunningAfter, WarnRunningAfterBy: maps.Clone(c.WarnRunningAfterTypes),
		PollInterval: c.PollInterval, MaxPollInterval: c.MaxPollInterval, PollOnly: c.PollOnly, ListenConfig: c.ListenConfig,
		ShutdownGrace: c.ShutdownGrace, Handlers: handlerSet{c.Handlers}, MaxResultBytes: c.MaxResultBytes,
		Channels: c.Channels, ClaimUnknownTypes: c.ClaimUnknownTypes, Logger: c.Logger, Version: c.Version,
		HeartbeatInterval: c.HeartbeatInterval, WorkerTimeout: c.WorkerTimeout, LeaderTTL: c.LeaderTTL,
		SessionGrace: c.SessionGrace, Retention: c.Retention, FailedRetention: c.FailedRetention,
		HistoryRetention: c.HistoryRetention, Observers: c.Observers, Middleware: c.Middleware, Periodic: c.periodic, DeclarePeriodic: c.Periodic != nil, QueueStatsInterval: c.QueueStatsInterval,
		Transport: c.Transport, RedispatchAfter: c.RedispatchAfter,
	}
}
