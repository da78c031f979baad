package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/cmd/taskorch/internal/failover"
	"github.com/taskorch/taskorch/internal/admin"
	mask "github.com/taskorch/taskorch/internal/redact"
)

// globals are the flags every command shares.
type globals struct {
	databaseURL string
	readURL     string // a read replica for listings and the dashboard's pages; "" for none
	jsonOut     bool
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "taskorch",
		Short: "A PostgreSQL-first task orchestrator",
		Long: `taskorch keeps every task, lease, attempt and outcome in PostgreSQL. Workers claim tasks
with FOR UPDATE SKIP LOCKED leases, run them and record outcomes; business processes are SQL
supervisors that read append-only facts.

Every command that talks to a database reads DATABASE_URL (or --database-url).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       currentBuild().String(),
	}
	root.SetVersionTemplate("taskorch {{.Version}}\n") // the same line as taskorch version
	// The flag's default is empty, not DATABASE_URL's value: --help prints defaults, and the
	// URL may hold a password. An unset flag falls back to the variable before any command runs.
	root.PersistentFlags().StringVar(&g.databaseURL, "database-url", "",
		"PostgreSQL URL (env DATABASE_URL)")
	root.PersistentFlags().StringVar(&g.readURL, "read-database-url", "",
		"a read replica: listings and the dashboard's pages read from it, actions go to DATABASE_URL (env TASKORCH_READ_DATABASE_URL)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed("database-url") {
			g.databaseURL = os.Getenv("DATABASE_URL")
		}
		if !cmd.Flags().Changed("read-database-url") {
			g.readURL = os.Getenv("TASKORCH_READ_DATABASE_URL")
		}
		return nil
	}
	root.SetFlagErrorFunc(flagError)

	root.AddCommand(
		newMigrateCmd(g),
		newEnqueueCmd(g),
		newTasksCmd(g),
		newWorkflowsCmd(g),
		newProcessesCmd(g),
		newWorkerCmd(g),
		newWorkersCmd(g),
		newSchedulesCmd(g),
		newDevCmd(g),
		newScaffoldCmd(g),
		newQueuesCmd(g),
		newLimitsCmd(g),
		newDashboardCmd(g),
		newWebhooksCmd(g),
		newAPICmd(g),
		newBenchCmd(g),
		newVersionCmd(g),
	)
	return root
}

// flagError rewrites pflag's parse errors for people: a bad value says what the flag wants
// (pflag quotes Go's parser: strconv.ParseInt: parsing "abc": invalid syntax), and an unknown
// flag points to the command's help. Every one is a usage error (exit 2).
func flagError(cmd *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) {
		return usageErrorf("invalid argument %q for --%s: %s", bad.GetValue(), bad.GetFlag().Name, wants(bad.GetFlag().Value.Type()))
	}
	var unknown *pflag.NotExistError
	if errors.As(err, &unknown) {
		return usageErrorf("%v (see '%s --help')", err, cmd.CommandPath())
	}
	return &usageError{err: err}
}

// wants says what a flag of pflag's type accepts.
func wants(typ string) string {
	switch typ {
	case "int", "int8", "int16", "int32", "int64":
		return "not a whole number"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		return "not a whole number of zero or more"
	case "float32", "float64":
		return "not a number"
	case "bool":
		return "not true or false"
	case "duration":
		return "not a duration such as 30s, 5m or 1h30m"
	default:
		return "not a valid " + typ
	}
}

// addJSONFlag gives a listing command its --json flag.
func addJSONFlag(cmd *cobra.Command, g *globals) {
	cmd.Flags().BoolVar(&g.jsonOut, "json", false, "print JSON instead of a table")
}

// connect opens a pool to the configured database and checks that it answers.
func (g *globals) connect(ctx context.Context) (*pgxpool.Pool, error) {
	if g.databaseURL == "" {
		return nil, usageErrorf("no database: set DATABASE_URL or pass --database-url (taskorch dev prints one)")
	}
	return connectTo(ctx, g.databaseURL, "DATABASE_URL", "the database")
}

// connectTo opens a pool of a few connections on url (named env in errors) and checks that it
// answers.
func connectTo(ctx context.Context, url, env, what string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, usageErrorf("%s is not a valid PostgreSQL URL: %v", env, redact(err))
	}
	cfg.MaxConns = 4
	unnamedStatements(cfg, url)
	failover.NewGuard(nil).Install(&cfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", what, redact(err))
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach %s at %s: %w", what, safeURL(url), redact(err))
	}
	return pool, nil
}

// connectRead opens the pool listings read from: the read replica when one is configured
// (--read-database-url, TASKORCH_READ_DATABASE_URL), after saying on stderr how far behind the
// primary it is; else the database itself.
func (g *globals) connectRead(ctx context.Context, stderr io.Writer) (*pgxpool.Pool, error) {
	if g.readURL == "" {
		return g.connect(ctx)
	}
	read, err := connectTo(ctx, g.readURL, "TASKORCH_READ_DATABASE_URL", "the read replica")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "taskorch: reading from %s: %s\n", safeURL(g.readURL), g.replicaLag(ctx, read))
	return read, nil
}

// replicaLag says how far read is behind the primary, in words; the primary is optional for a
// listing, so its absence is said, not an error.
func (g *globals) replicaLag(ctx context.Context, read *pgxpool.Pool) string {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if g.databaseURL == "" {
		return "a replica, its lag unknown (no DATABASE_URL to compare with)"
	}
	primary, err := connectTo(lctx, g.databaseURL, "DATABASE_URL", "the database")
	if err != nil {
		return "a replica, its lag unknown (" + err.Error() + ")"
	}
	defer primary.Close()
	l, err := admin.ReadReplicaLag(lctx, primary, read)
	if err != nil {
		return "a replica, its lag unknown (" + redact(err).Error() + ")"
	}
	if !l.Standby {
		return "the read database is " + l.String()
	}
	return "a replica, " + l.String()
}

// readClient is client on connectRead's pool: for the commands that only read.
func (g *globals) readClient(cmd *cobra.Command) (*taskorch.Client, func(), error) {
	pool, err := g.connectRead(cmd.Context(), cmd.ErrOrStderr())
	if err != nil {
		return nil, nil, err
	}
	c, err := taskorch.NewClient(pool, nil)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return c, pool.Close, nil
}

func (g *globals) client(ctx context.Context) (*taskorch.Client, func(), error) {
	return g.clientWith(ctx, nil)
}

// clientWith is client with a configuration (nil: the defaults).
func (g *globals) clientWith(ctx context.Context, cfg *taskorch.ClientConfig) (*taskorch.Client, func(), error) {
	pool, err := g.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	c, err := taskorch.NewClient(pool, cfg)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return c, pool.Close, nil
}

// execModeParam is pgx's connection-string parameter that chooses how statements are sent.
const execModeParam = "default_query_exec_mode"

// unnamedStatements makes cfg send every statement unnamed (pgx's exec mode), unless the URL
// chose a mode itself: named prepared statements fail through a transaction-pooling proxy
// (PgBouncer in transaction mode), where consecutive statements may run on different server
// connections, and the operator's commands and the dashboard gain nothing from caching them.
func unnamedStatements(cfg *pgxpool.Config, url string) {
	if !strings.Contains(url, execModeParam) {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
}

// safeURL hides the password in a database URL.
func safeURL(u string) string {
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}

// redactString hides every secret in s (a message that may quote a connection string): URL
// passwords (postgres://user:xxxxx@host) and key=value secrets (password=xxxxx), by
// internal/redact, the rule the dashboard and the worker's logs share.
func redactString(s string) string { return mask.String(s) }

// redact keeps passwords out of error messages that quote a connection string.
func redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if r := redactString(msg); r != msg {
		return errors.New(r)
	}
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func isInputError(err error) bool {
	return errors.Is(err, taskorch.ErrInvalidInput) || errors.Is(err, admin.ErrInvalidReason) || errors.Is(err, admin.ErrInvalidInput)
}

// isNotFound: no such task, schedule, worker, workflow, process or process instance (exit code 3).
func isNotFound(err error) bool {
	return errors.Is(err, taskorch.ErrNotFound) || errors.Is(err, admin.ErrScheduleNotFound) || errors.Is(err, admin.ErrWorkerNotFound) ||
		errors.Is(err, admin.ErrWorkflowNotFound) ||
		errors.Is(err, admin.ErrProcessNotFound) || errors.Is(err, admin.ErrInstanceNotFound)
}
func isWrongState(err error) bool {
	return errors.Is(err, taskorch.ErrWrongState) || errors.Is(err, admin.ErrNotRetryable)
}

// exactArgs is cobra.ExactArgs with a usage error (exit code 2).
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return &usageError{err: err}
		}
		return nil
	}
}

// noArgs is cobra.NoArgs with a usage error (exit code 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return &usageError{err: err}
	}
	return nil
}
