package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/pgcluster"
)

func newDevCmd(g *globals) *cobra.Command {
	var (
		dataDir string
		fresh   bool
		once    bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run taskorch locally on a private PostgreSQL, with a demo",
		Long: `Starts a private PostgreSQL from this machine's own binaries (unless DATABASE_URL is set),
applies the migrations, runs a small demo (enqueues tasks, claims them, completes some, fails one
so that it is retried with backoff) and prints what happened. It then keeps PostgreSQL running
and prints its URL, so you can look around with psql or the other taskorch commands, until
Ctrl-C, which stops everything it started.

Data persists across runs in --data-dir; --fresh starts over.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			dbURL := g.databaseURL
			if dbURL == "" {
				if dataDir == "" {
					dataDir = defaultDevDir()
				}
				cluster, err := startDevCluster(ctx, cmd.ErrOrStderr(), dataDir, fresh)
				if err != nil {
					return err
				}
				defer func() {
					stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
					defer cancel()
					fmt.Fprintln(cmd.ErrOrStderr(), "stopping PostgreSQL")
					if err := cluster.Stop(stopCtx); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), "taskorch: stop PostgreSQL:", err)
					}
				}()
				dbURL = cluster.URL("postgres")
			}
			pool, err := pgxpool.New(ctx, dbURL)
			if err != nil {
				return fmt.Errorf("connect: %w", redact(err))
			}
			defer pool.Close()
			applied, err := taskorch.Migrate(ctx, pool, nil)
			if errors.Is(err, migrate.ErrChecksumMismatch) && g.databaseURL == "" {
				return fmt.Errorf("%w\nthe private database in %s was made by another version of taskorch: run `taskorch dev --fresh` to start over", err, dataDir)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "migrations: %d applied\n", len(applied))
			if err := runDemo(ctx, out, pool); err != nil {
				return err
			}
			fmt.Fprintln(out, "\nPostgreSQL:")
			fmt.Fprintln(out, dbURL)
			fmt.Fprintf(out, "\nTry:\n  DATABASE_URL='%s' taskorch tasks list\n  psql '%s' -c 'select * from queues.task_event'\n", dbURL, dbURL)
			if once {
				return nil
			}
			fmt.Fprintln(out, "\nPress Ctrl-C to stop.")
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "where the private PostgreSQL keeps its data (default: the user's data dir)")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "delete the private PostgreSQL's data and start over")
	cmd.Flags().BoolVar(&once, "once", false, "run the demo and exit instead of waiting for Ctrl-C")
	return cmd
}

// defaultDevDir is $XDG_DATA_HOME/taskorch/dev (~/.local/share/taskorch/dev). As root it is
// /var/lib/taskorch/dev: PostgreSQL runs as the postgres user, which cannot enter /root.
func defaultDevDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/taskorch/dev"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "taskorch", "dev")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "taskorch-dev")
	}
	return filepath.Join(home, ".local", "share", "taskorch", "dev")
}

// startDevCluster starts the private PostgreSQL in dir/pgdata, with a password generated on
// the first run and kept in dir/password (mode 0600).
func startDevCluster(ctx context.Context, logw io.Writer, dir string, fresh bool) (*pgcluster.Cluster, error) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		return nil, err
	}
	if fresh {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("--fresh: %w", err)
		}
	}
	// 0755: as root, PostgreSQL runs as the postgres user, which must be able to enter it.
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // see above
		return nil, fmt.Errorf("data dir: %w", err)
	}
	pwFile := filepath.Join(dir, "password")
	pw, err := os.ReadFile(pwFile)
	if errors.Is(err, os.ErrNotExist) {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		pw = []byte(hex.EncodeToString(b))
		if _, statErr := os.Stat(filepath.Join(dir, "pgdata", "PG_VERSION")); statErr == nil {
			return nil, fmt.Errorf("%s lost its password file; run with --fresh to start over", dir)
		}
		if err := os.WriteFile(pwFile, pw, 0o600); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	fmt.Fprintf(logw, "starting a private PostgreSQL in %s\n", dir)
	return pgcluster.Start(ctx, pgcluster.Config{
		DataDir:  filepath.Join(dir, "pgdata"),
		Password: strings.TrimSpace(string(pw)),
		Logf:     func(format string, args ...any) { fmt.Fprintf(logw, "  "+format+"\n", args...) },
	})
}

// demoArgs is the payload of the demo's tasks.
type demoArgs struct {
	Step string `json:"step"`
}

func (demoArgs) TaskType() string { return "demo.hello" }

// runDemo enqueues a few tasks, claims them as a worker would, completes all but one, fails
// that one (it is retried with backoff) and prints the tasks and their events.
func runDemo(ctx context.Context, out io.Writer, pool *pgxpool.Pool) error {
	c, err := taskorch.NewClient(pool, nil)
	if err != nil {
		return err
	}
	runKey := time.Now().UTC().Format("20060102T150405.000")
	ids, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{
		{Args: demoArgs{Step: "low priority"}},
		{Args: demoArgs{Step: "high priority"}, Opts: &taskorch.EnqueueOpts{Priority: 10}},
		{Args: demoArgs{Step: "will fail once"}, Opts: &taskorch.EnqueueOpts{Priority: 5, MaxAttempts: 3}},
		{Args: demoArgs{Step: "idempotent"}, Opts: &taskorch.EnqueueOpts{IdempotencyKey: "demo-" + runKey}},
		{Args: demoArgs{Step: "idempotent again"}, Opts: &taskorch.EnqueueOpts{IdempotencyKey: "demo-" + runKey}},
		{Args: demoArgs{Step: "tomorrow"}, Opts: &taskorch.EnqueueOpts{ScheduledAt: time.Now().Add(24 * time.Hour)}},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "enqueued tasks %v (the two idempotent ones share an id)\n", ids)

	// Claim as a worker would: one statement, priority first; the future task stays pending.
	rows, err := pool.Query(ctx, `select task_id, lease_id, payload->>'step' from queues.claim_tasks('demo-worker', 10)
		where task_id = any($1)`, ids)
	if err != nil {
		return err
	}
	type claimed struct {
		id, lease int64
		step      string
	}
	var got []claimed
	for rows.Next() {
		var c claimed
		if err := rows.Scan(&c.id, &c.lease, &c.step); err != nil {
			return err
		}
		got = append(got, c)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	fmt.Fprintln(out, "claimed, in order:")
	for _, t := range got {
		fmt.Fprintf(out, "  task %d (%s) under lease %d\n", t.id, t.step, t.lease)
		if t.step == "will fail once" {
			var status string
			if err := pool.QueryRow(ctx, `select queues.fail_task($1, 'demo: the provider timed out', $2)::text`, t.id, t.lease).Scan(&status); err != nil {
				return err
			}
			fmt.Fprintf(out, "    failed: now %s, retried after a backoff\n", status)
			continue
		}
		var ok bool
		if err := pool.QueryRow(ctx, `select queues.complete_task($1, $2)`, t.id, t.lease).Scan(&ok); err != nil {
			return err
		}
		fmt.Fprintf(out, "    completed: %v\n", ok)
	}
	if len(got) > 0 {
		var refused bool
		if err := pool.QueryRow(ctx, `select not queues.complete_task($1, $2 + 1000000)`, got[0].id, got[0].lease).Scan(&refused); err != nil {
			return err
		}
		fmt.Fprintf(out, "a completion of task %d under a stale lease: refused=%v (recorded in queues.error)\n", got[0].id, refused)
	}

	list, err := c.List(ctx, &taskorch.ListParams{Limit: 10})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\nnewest tasks:")
	if err := printTaskTable(out, list); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(out, "\ntheir events (queues.task_event):")
	erows, err := pool.Query(ctx, `select task_id, event, coalesce(from_status::text, '-'), coalesce(to_status::text, '-'), coalesce(lease_id::text, '-')
		from queues.task_event where task_id = any($1) order by task_event_id`, ids)
	if err != nil {
		return err
	}
	defer erows.Close()
	fmt.Fprintln(tw, "  TASK\tEVENT\tFROM\tTO\tLEASE")
	for erows.Next() {
		var id int64
		var ev, from, to, lease string
		if err := erows.Scan(&id, &ev, &from, &to, &lease); err != nil {
			return err
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", id, ev, from, to, lease)
	}
	if err := erows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}
