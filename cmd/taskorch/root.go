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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
)

// globals are the flags every command shares.
type globals struct {
	databaseURL string
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
	root.PersistentFlags().StringVar(&g.databaseURL, "database-url", os.Getenv("DATABASE_URL"),
		"PostgreSQL URL (env DATABASE_URL)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })

	root.AddCommand(
		newMigrateCmd(g),
		newEnqueueCmd(g),
		newTasksCmd(g),
		newWorkerCmd(g),
		newWorkersCmd(g),
		newSchedulesCmd(g),
		newDevCmd(g),
		newScaffoldCmd(g),
		newQueuesCmd(g),
		newLimitsCmd(g),
		newDashboardCmd(g),
		newBenchCmd(g),
		newVersionCmd(g),
	)
	return root
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
	cfg, err := pgxpool.ParseConfig(g.databaseURL)
	if err != nil {
		return nil, usageErrorf("DATABASE_URL is not a valid PostgreSQL URL: %v", redact(err))
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the database: %w", redact(err))
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the database at %s: %w", safeURL(g.databaseURL), redact(err))
	}
	return pool, nil
}

func (g *globals) client(ctx context.Context) (*taskorch.Client, func(), error) {
	pool, err := g.connect(ctx)
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

// safeURL hides the password in a database URL.
func safeURL(u string) string {
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}

// redact keeps passwords out of error messages that quote a connection string.
func redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if i := strings.Index(msg, "password="); i >= 0 {
		j := strings.IndexAny(msg[i:], " )")
		if j < 0 {
			j = len(msg) - i
		}
		msg = msg[:i] + "password=xxxxx" + msg[i+j:]
	}
	return errors.New(msg)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func isInputError(err error) bool { return errors.Is(err, taskorch.ErrInvalidInput) }
func isNotFound(err error) bool   { return errors.Is(err, taskorch.ErrNotFound) }
func isWrongState(err error) bool { return errors.Is(err, taskorch.ErrWrongState) }

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
