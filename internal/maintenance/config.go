package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// Defaults of Config's durations.
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultWorkerTimeout     = 30 * time.Second
	DefaultLeaderTTL         = 15 * time.Second
	DefaultRetention         = 7 * 24 * time.Hour
	DefaultFailedRetention   = 30 * 24 * time.Hour
	DefaultPruneInterval     = time.Minute
	DefaultScheduleInterval  = time.Second
	DefaultScheduleCatchUp   = time.Minute // or 2 × LeaderTTL when that is longer

	DefaultSessionGrace         = time.Second
	DefaultSessionCheckInterval = 250 * time.Millisecond
	DefaultLeaderPollInterval   = 500 * time.Millisecond
)

// NoGrace is the Config.SessionGrace that recovers the tasks of a worker whose session is gone
// at the first check that finds it gone. (Zero means the default.)
const NoGrace time.Duration = -1

// maxLeaderTTL is the longest leader lease queues.acquire_leadership grants.
const maxLeaderTTL = time.Hour

// KeepForever turns pruning off when set as Config.Retention, Config.FailedRetention or
// Config.HistoryRetention. (Zero means the default, as for every field of Config.)
const KeepForever time.Duration = -1

// Config configures a Maintainer. The zero value of every field means its default.
type Config struct {
	// WorkerID identifies the worker in queues.worker and as the holder of its tasks' leases:
	// the task loop must claim with the same id. Defaults to NewWorkerID(Hostname, PID).
	WorkerID string

	// Hostname is recorded in queues.worker. Defaults to os.Hostname().
	Hostname string

	// PID is recorded in queues.worker. Defaults to os.Getpid().
	PID int

	// PoolSize is the number of tasks the worker runs at once, recorded in queues.worker.
	// Defaults to 0 (unknown).
	PoolSize int

	// Version is the worker's taskorch version, recorded in queues.worker. Defaults to none.
	Version string

	// Transport is the worker's transport (WorkerConfig.Transport), recorded in queues.worker by
	// its name (redis, sqs). Defaults to nil, recorded as "postgres": the worker claims from
	// PostgreSQL.
	Transport interface{ Name() string }

	// TaskTypes are the types the worker claims, recorded in queues.worker. Defaults to none
	// (all types).
	TaskTypes []string

	// HeartbeatInterval is how often the worker updates its row (one UPDATE each time).
	// Defaults to 5 seconds.
	HeartbeatInterval time.Duration

	// WorkerTimeout is how long a worker may go without a heartbeat before the leader deletes
	// it and recovers its running tasks, whether its session (see Session) is alive or not: a
	// stopped or partitioned process keeps its session. It must be at least twice
	// HeartbeatInterval, and at most a day. Defaults to 30 seconds. The leader checks every
	// HeartbeatInterval.
	WorkerTimeout time.Duration

	// LeaderTTL is the leader lease: a leader renews it every LeaderTTL/3, and another worker
	// takes over when it has not been renewed for LeaderTTL (at once when the leader resigns at
	// shutdown, or when the leader's session is gone). It also bounds each leader action (a
	// reaper pass, a prune batch, a schedule step). At most an hour. Defaults to 15 seconds.
	LeaderTTL time.Duration

	// Session opens the worker's session: a connection of its own, to PostgreSQL directly or
	// through a session pooler (never a transaction pooler), which the worker holds for its life.
	// The worker registers on it and holds an advisory lock there; the lock goes when the
	// session does (the process died, the connection was cut), and so the leader finds a
	// crashed worker within SessionGrace instead of WorkerTimeout. When the connection drops,
	// the worker opens another and registers again at once, keeping its tasks if it is back
	// within SessionGrace. Nil: no session; the worker is found dead by its heartbeats alone
	// (docs/operations.md, "Crashed workers").
	Session func(ctx context.Context) (*pgx.Conn, error)

	// SessionGrace is how long a worker's session must have been gone before the leader
	// recovers its running tasks: a live worker whose connection dropped registers again within
	// it and keeps them. The leader's setting applies. Defaults to 1 second; NoGrace for none.
	SessionGrace time.Duration

	// SessionCheckInterval is how often the leader looks for workers whose session is gone (one
	// statement, which writes nothing while every session is alive). Defaults to 250 ms.
	SessionCheckInterval time.Duration

	// LeaderPollInterval is how often a worker that does not lead tries to take the lease (a
	// read while the leader lives): it takes over this soon after the leader's session is gone.
	// Defaults to 500 ms (LeaderTTL/3 when that is shorter).
	LeaderPollInterval time.Duration

	// Retention is how long completed and cancelled tasks are kept, with their error rows,
	// before the leader deletes them. Defaults to 7 days; KeepForever keeps them.
	Retention time.Duration

	// FailedRetention is the same for failed and dead tasks, which a person may still want to
	// inspect or retry. Defaults to 30 days; KeepForever keeps them.
	FailedRetention time.Duration

	// HistoryRetention is how long the lease and event history is kept: the leader drops a
	// whole UTC day of it (a partition of queues.task_lease and of queues.task_event) once the
	// day ended more than HistoryRetention ago. Defaults to the larger of Retention and
	// FailedRetention, so no task loses its history while the task is kept (KeepForever when
	// either is); KeepForever keeps it.
	HistoryRetention time.Duration

	// PruneInterval is how often the leader prunes. Each pass deletes in batches of 1,000 tasks
	// until nothing is left to prune. Defaults to 1 minute.
	PruneInterval time.Duration

	// ScheduleInterval is how often the leader looks for due schedule ticks: a tick is enqueued
	// at most this late. Defaults to 1 second.
	ScheduleInterval time.Duration

	// ScheduleCatchUp is the catch-up window: when the leader finds ticks of a schedule missed
	// (a handover, an outage, no worker running), it enqueues every missed tick at most this
	// old, each once, oldest first; older ones are skipped (EventTicksMissed), except that a
	// schedule whose every missed tick is older enqueues its most recent one. Defaults to the
	// larger of 1 minute and 2 × LeaderTTL, which covers any handover: a killed leader is
	// replaced within LeaderPollInterval, a stopped one within LeaderTTL. At most 24 hours.
	ScheduleCatchUp time.Duration

	// Periodic is the schedules the worker's code declares (WorkerConfig.Periodic). When
	// DeclarePeriodic is set, the leader makes the schedules declared in code exactly these at
	// the start of each of its terms, before it enqueues any tick (queues.declare_schedules).
	Periodic        []Periodic
	DeclarePeriodic bool

	// ScheduleLateAfter is how late a tick may be enqueued before it counts as late
	// (EventScheduled's Late): a leader that runs on time enqueues each tick within
	// ScheduleInterval. Defaults to the larger of 3 seconds and 3 × ScheduleInterval.
	ScheduleLateAfter time.Duration

	// Logger receives errors (at Warn: every one is retried) and leadership changes (at Info).
	// Defaults to slog.Default().
	Logger *slog.Logger

	// OnEvent, if set, is called for everything the Maintainer does (see EventKind): tests
	// wait on it instead of sleeping, and metrics can count with it. It is called from the
	// Maintainer's goroutines, possibly concurrently, and must return quickly.
	OnEvent func(Event)

	// Now is the clock schedule ticks are computed with. Defaults to time.Now. (Liveness and
	// leases use the database's clock.) Tests set it to step through ticks.
	Now func() time.Time
}

// withDefaults returns cfg with its zero fields set to their defaults, validated.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Hostname == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "unknown"
		}
		cfg.Hostname = h
	}
	if cfg.PID == 0 {
		cfg.PID = os.Getpid()
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = NewWorkerID(cfg.Hostname, cfg.PID)
	}
	setDefault(&cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	setDefault(&cfg.WorkerTimeout, DefaultWorkerTimeout)
	setDefault(&cfg.LeaderTTL, DefaultLeaderTTL)
	setDefault(&cfg.Retention, DefaultRetention)
	setDefault(&cfg.FailedRetention, DefaultFailedRetention)
	if cfg.HistoryRetention == 0 {
		cfg.HistoryRetention = defaultHistoryRetention(cfg.Retention, cfg.FailedRetention)
	}
	setDefault(&cfg.PruneInterval, DefaultPruneInterval)
	setDefault(&cfg.ScheduleInterval, DefaultScheduleInterval)
	setDefault(&cfg.ScheduleCatchUp, max(DefaultScheduleCatchUp, 2*cfg.LeaderTTL))
	setDefault(&cfg.ScheduleLateAfter, max(3*time.Second, 3*cfg.ScheduleInterval))
	setDefault(&cfg.SessionGrace, DefaultSessionGrace)
	setDefault(&cfg.SessionCheckInterval, DefaultSessionCheckInterval)
	setDefault(&cfg.LeaderPollInterval, DefaultLeaderPollInterval)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg, cfg.validate()
}

// defaultHistoryRetention is the larger of the tasks' retentions: KeepForever when either is.
func defaultHistoryRetention(retention, failedRetention time.Duration) time.Duration {
	if retention == KeepForever || failedRetention == KeepForever {
		return KeepForever
	}
	return max(retention, failedRetention)
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// validate checks a Config whose defaults are set.
func (cfg Config) validate() error {
	var errs []error
	if len(cfg.WorkerID) > 256 {
		errs = append(errs, fmt.Errorf("WorkerID is %d bytes long, at most 256", len(cfg.WorkerID)))
	}
	if cfg.PoolSize < 0 {
		errs = append(errs, fmt.Errorf("PoolSize must not be negative, got %d", cfg.PoolSize))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HeartbeatInterval", cfg.HeartbeatInterval},
		{"WorkerTimeout", cfg.WorkerTimeout},
		{"LeaderTTL", cfg.LeaderTTL},
		{"PruneInterval", cfg.PruneInterval},
		{"ScheduleInterval", cfg.ScheduleInterval},
		{"ScheduleCatchUp", cfg.ScheduleCatchUp},
		{"ScheduleLateAfter", cfg.ScheduleLateAfter},
		{"SessionCheckInterval", cfg.SessionCheckInterval},
		{"LeaderPollInterval", cfg.LeaderPollInterval},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.v))
		}
	}
	if cfg.WorkerTimeout > 24*time.Hour {
		errs = append(errs, fmt.Errorf("WorkerTimeout must be at most 24h, got %s", cfg.WorkerTimeout))
	}
	if cfg.WorkerTimeout < 2*cfg.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("WorkerTimeout (%s) must be at least twice HeartbeatInterval (%s), or live workers would be reaped",
			cfg.WorkerTimeout, cfg.HeartbeatInterval))
	}
	if cfg.LeaderTTL > 0 && cfg.LeaderTTL < 3*time.Millisecond {
		errs = append(errs, fmt.Errorf("LeaderTTL must be at least 3ms, got %s", cfg.LeaderTTL))
	}
	if cfg.ScheduleCatchUp > 24*time.Hour {
		errs = append(errs, fmt.Errorf("ScheduleCatchUp must be at most 24h, got %s", cfg.ScheduleCatchUp))
	}
	if cfg.LeaderTTL > maxLeaderTTL {
		errs = append(errs, fmt.Errorf("LeaderTTL must be at most %s, got %s", maxLeaderTTL, cfg.LeaderTTL))
	}
	if cfg.SessionGrace < 0 && cfg.SessionGrace != NoGrace || cfg.SessionGrace > time.Hour {
		errs = append(errs, fmt.Errorf("SessionGrace must be positive (at most an hour) or NoGrace, got %s", cfg.SessionGrace))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Retention", cfg.Retention}, {"FailedRetention", cfg.FailedRetention}, {"HistoryRetention", cfg.HistoryRetention}} {
		if d.v < 0 && d.v != KeepForever {
			errs = append(errs, fmt.Errorf("%s must be positive or KeepForever, got %s", d.name, d.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("maintenance: invalid Config: %w", err)
	}
	return nil
}
