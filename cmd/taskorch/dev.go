package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/pgcluster"
	"github.com/taskorch/taskorch/providers"
)

func newDevCmd(g *globals) *cobra.Command {
	var (
		dataDir string
		fresh   bool
		once    bool
		addr    string
		token   string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run taskorch locally on a private PostgreSQL: worker, dashboard, processes and a demo",
		Long: `Starts everything a newcomer needs on this machine, and stops it all at Ctrl-C:

  - a private PostgreSQL from this machine's own binaries (unless DATABASE_URL is set), in
    --data-dir, on a free loopback port; data persists across runs, --fresh starts over;
  - the migrations and the shipped processes (comms, files, accounts);
  - a worker with the outbox providers: emails, SMS and file deletions are recorded in
    queues.outbox_message instead of being sent;
  - the dashboard, on a free loopback port, with a generated sign-in token;
  - on the first run, a demo that moves: emails and SMS (one fails once and is retried, one
    never gets through), a scheduled email, a file deletion, an account deletion, Go-handler
    tasks (one ends dead) and a schedule ticking every minute.

It prints the dashboard URL and a PostgreSQL URL, each on a line of its own. --once waits until
the demo's processes have finished, prints what happened, and exits.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd, g, devOptions{dataDir: dataDir, fresh: fresh, once: once, addr: addr, token: token})
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "where the private PostgreSQL keeps its data (default: the user's data dir)")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "delete the private PostgreSQL's data and start over")
	cmd.Flags().BoolVar(&once, "once", false, "wait for the demo's processes to finish, print them and exit")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "the dashboard's address (port 0 picks a free one)")
	cmd.Flags().StringVar(&token, "token", "", "the dashboard's sign-in token (env "+envDashboardToken+"; generated when neither is set)")
	return cmd
}

type devOptions struct {
	dataDir, addr, token string
	fresh, once          bool
}

// devProcesses are the shipped processes taskorch dev installs and demonstrates.
var devProcesses = []string{"comms", "files", "accounts"}

func runDev(cmd *cobra.Command, g *globals, o devOptions) error {
	ctx := cmd.Context()
	out, logw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	dbURL := g.databaseURL
	private := dbURL == ""
	if private {
		if o.dataDir == "" {
			o.dataDir = defaultDevDir()
		}
		cluster, err := startDevCluster(ctx, logw, o.dataDir, o.fresh)
		if err != nil {
			return err
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			fmt.Fprintln(logw, "stopping PostgreSQL")
			if err := cluster.Stop(stopCtx); err != nil {
				fmt.Fprintln(logw, "taskorch: stop PostgreSQL:", err)
			}
		}()
		dbURL = cluster.URL("postgres")
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return usageErrorf("DATABASE_URL is not a valid PostgreSQL URL: %v", redact(err))
	}
	cfg.MaxConns = 24
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", redact(err))
	}
	defer pool.Close()
	applied, err := taskorch.Migrate(ctx, pool, &taskorch.MigrateOpts{Processes: devProcesses})
	if errors.Is(err, migrate.ErrChecksumMismatch) && private {
		return fmt.Errorf("%w\nthe private database in %s was made by another version of taskorch: run `%s dev --fresh` to start over", err, o.dataDir, selfCommand())
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(logw, "migrations: %d applied (core and the processes %s)\n", len(applied), strings.Join(devProcesses, ", "))

	// The worker: built-in and demo Go handlers, and the outbox for every channel.
	channels, err := providers.Config{EmailProvider: "outbox", SMSProvider: "outbox", FilesSigner: "outbox"}.Channels(pool)
	if err != nil {
		return err
	}
	hs := taskorch.NewHandlers()
	builtinhandlers.Register(hs)
	taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[demoArgs]) error { return nil })
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		ID:          "dev-worker",
		Concurrency: 10,
		Handlers:    hs,
		Channels:    channels,
		Logger:      slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Version:     currentBuild().Version,
	})
	if err != nil {
		return err
	}
	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(workerCtx) }()
	defer func() {
		stopWorker()
		if err := <-workerDone; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(logw, "taskorch: worker:", err)
		}
	}()

	if o.token == "" {
		o.token = os.Getenv(envDashboardToken)
	}
	d, err := startDashboard(ctx, pool, dashboardOptions{Addr: o.addr, Token: o.token, Log: logw})
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = d.Stop(stopCtx)
	}()

	seeded, err := seedDemo(ctx, pool)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if seeded {
		// A database the demo is seeded in is the demo's: its processes retry within seconds.
		if err := fastDevProcesses(ctx, pool); err != nil {
			return err
		}
		fmt.Fprintln(logw, "demo: seeded (emails, SMS, a file deletion, an account deletion, Go tasks, a schedule)")
	} else {
		fmt.Fprintln(logw, "demo: already seeded in this database; run with --fresh to see it again")
	}

	printDashboard(out, d)
	fmt.Fprintln(out, "PostgreSQL:")
	fmt.Fprintln(out, dbURL)
	if o.once {
		if err := waitDemo(ctx, pool, 90*time.Second); err != nil {
			return err
		}
		return printDemo(ctx, out, pool)
	}
	fmt.Fprintf(out, "\nTry:\n  DATABASE_URL='%s' %s tasks list\n  psql '%s' -c 'select * from queues.outbox_message'\n", dbURL, selfCommand(), dbURL)
	fmt.Fprintln(out, "\nPress Ctrl-C to stop.")
	<-ctx.Done()
	fmt.Fprintln(logw, "stopping the worker and the dashboard")
	return nil
}

// selfCommand is how to run this taskorch again from the working directory, as printed in a
// shell command: "taskorch" when that is what PATH finds, else the running executable's path,
// relative to the working directory when inside it (bin/taskorch, as make demo runs it).
func selfCommand() string {
	resolve := func(p string) string {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real
		}
		return p
	}
	exe, err := os.Executable()
	if err != nil {
		return "taskorch"
	}
	onPath := ""
	if p, err := exec.LookPath("taskorch"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			onPath = resolve(abs)
		}
	}
	cwd, err := os.Getwd()
	if err == nil {
		cwd = resolve(cwd)
	}
	return commandFor(resolve(exe), onPath, cwd)
}

// shellSafe matches a word a POSIX shell takes as it is.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./+:@%=,-]+$`)

// commandFor is selfCommand's choice, given the executable's path, what PATH finds as taskorch
// ("" for nothing) and the working directory ("" when unknown), all absolute and resolved.
func commandFor(exe, onPath, cwd string) string {
	if exe == onPath {
		return "taskorch"
	}
	if cwd != "" {
		if rel, err := filepath.Rel(cwd, exe); err == nil && filepath.IsLocal(rel) {
			exe = rel
			if !strings.ContainsRune(rel, filepath.Separator) {
				exe = "." + string(filepath.Separator) + rel // else the shell would search PATH
			}
		}
	}
	if shellSafe.MatchString(exe) {
		return exe
	}
	return "'" + strings.ReplaceAll(exe, "'", `'\''`) + "'"
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

// demoArgs is the payload of the demo's Go-handler tasks.
type demoArgs struct {
	Step string `json:"step"`
}

// TaskType is the demo's Go task type.
func (demoArgs) TaskType() string { return "demo.hello" }
