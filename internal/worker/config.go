package worker

import (
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/maintenance"
	"github.com/taskorch/taskorch/tasktype"
	"github.com/taskorch/taskorch/transport"
)

// Config is a worker's configuration, checked and with its defaults applied by package
// taskorch (WorkerConfig, whose fields' comments say what each means).
type Config struct {
	ID                 string
	Concurrency        int
	FetchBatch         int
	ClaimAhead         int // negative: no claiming ahead
	LeaseDuration      time.Duration
	TaskTimeout        time.Duration
	WarnRunningAfter   time.Duration            // 0: no warning
	WarnRunningAfterBy map[string]time.Duration // by type; negative: none for the type
	PollInterval       time.Duration
	MaxPollInterval    time.Duration
	PollOnly           bool
	ListenConfig       *pgx.ConnConfig
	ShutdownGrace      time.Duration
	Handlers           Handlers
	MaxResultBytes     int // negative: no bound
	Channels           map[string]tasktype.ChannelProvider
	ClaimUnknownTypes  bool
	Logger             *slog.Logger
	Version            string
	HeartbeatInterval  time.Duration
	WorkerTimeout      time.Duration
	LeaderTTL          time.Duration
	SessionGrace       time.Duration // negative: no grace
	Retention          time.Duration // negative: forever
	FailedRetention    time.Duration // negative: forever
	HistoryRetention   time.Duration // negative: forever
	Observers          []tasktype.Observer
	Middleware         []tasktype.Middleware // the first outermost
	Periodic           []maintenance.Periodic
	DeclarePeriodic    bool // Periodic is the code's list (even empty): the leader declares it
	QueueStatsInterval time.Duration
	Transport          transport.Transport // nil: PostgreSQL delivery
	RedispatchAfter    time.Duration
}

// Handlers is the worker's view of the Go handlers registered by type (taskorch.Handlers).
type Handlers interface {
	// Lookup returns the handler of taskType and its options.
	Lookup(taskType string) (tasktype.Handler, tasktype.HandlerOpts, bool)
	// Types lists the registered types.
	Types() []string
}

// PostgresTransport is the transport name of a worker without a transport, in queues.worker,
// logs and metrics.
const PostgresTransport = "postgres"

// TransportName is the name of a worker's transport: its Name, PostgresTransport when nil.
func TransportName(tr transport.Transport) string {
	if tr == nil {
		return PostgresTransport
	}
	return tr.Name()
}

// IsChannelType reports whether t is one of the channel task types (tasktype.ChannelTypes).
func IsChannelType(t string) bool { return slices.Contains(tasktype.ChannelTypes, t) }

// knownTypes lists the task types a worker with this configuration can run, sorted: db_function,
// its Go handlers' types and the channels it has a provider for. It claims only these, and
// records them in queues.worker, unless ClaimUnknownTypes is set.
func knownTypes(c Config) []string {
	types := []string{tasktype.TypeDBFunction}
	if c.Handlers != nil {
		types = append(types, c.Handlers.Types()...)
	}
	for t, p := range c.Channels {
		if p != nil {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	return slices.Compact(types)
}

// claimTypes is what the claims pass as _task_types: the known types, or nil (every type) with
// ClaimUnknownTypes.
func claimTypes(c Config) []string {
	if c.ClaimUnknownTypes {
		return nil
	}
	return knownTypes(c)
}
