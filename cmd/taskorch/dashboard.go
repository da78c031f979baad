package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch/dashboard"
)

// envDashboardToken is the dashboard token's environment variable (--token's twin).
const envDashboardToken = "TASKORCH_DASHBOARD_TOKEN" //nolint:gosec // the variable's name, not a credential

// envDashboardTokensFile is --tokens-file's environment variable.
const envDashboardTokensFile = "TASKORCH_DASHBOARD_TOKENS_FILE" //nolint:gosec // the variable's name, not a credential

func newDashboardCmd(g *globals) *cobra.Command {
	var opts dashboardOptions
	var tokensFile string
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the web dashboard",
		Long: `Serves the web dashboard (docs/dashboard.md): every task, lease, event, error, process, worker,
schedule and outbox message of the database, with retry, cancel, delete, pause and resume,
schedule controls, and who did each.

Actions need the token (--token or TASKORCH_DASHBOARD_TOKEN; without one a token is generated
and printed): sign in with it on the page, or send it as "Authorization: Bearer <token>".
--tokens-file (TASKORCH_DASHBOARD_TOKENS_FILE) gives each person a token of their own: a file
of "NAME TOKEN" lines (# comments). Every retry, cancel, delete, pause and schedule change is
recorded with who did it: "dashboard:NAME" (the --token's holder is "dashboard:token").
--read-only turns every action off; its pages are then open to anyone who can reach --addr
unless a token is given too. The URL is printed on a line of its own.

With --read-database-url (TASKORCH_READ_DATABASE_URL), a streaming standby, every page reads
from it and says how far behind the primary it is; actions still go to DATABASE_URL.`,
		Example: `  taskorch dashboard
  TASKORCH_DASHBOARD_TOKEN=... taskorch dashboard --addr 0.0.0.0:8080
  taskorch dashboard --read-only`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			pool, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			if opts.Token == "" {
				opts.Token = os.Getenv(envDashboardToken)
			}
			if tokensFile == "" {
				tokensFile = os.Getenv(envDashboardTokensFile)
			}
			if tokensFile != "" {
				if opts.Tokens, err = readTokensFile(tokensFile); err != nil {
					return err
				}
			}
			opts.Log = cmd.ErrOrStderr()
			if g.readURL != "" {
				// Said at start (a read URL that is not a standby is allowed), and on every page.
				read, err := g.connectRead(ctx, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer read.Close()
				opts.ReadPool = read
			}
			d, err := startDashboard(ctx, pool, opts)
			if err != nil {
				return err
			}
			printDashboard(cmd.OutOrStdout(), d)
			<-ctx.Done()
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return d.Stop(stopCtx)
		},
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	// The token's default is read in RunE, not shown as the flag's default: --help must not print it.
	cmd.Flags().StringVar(&opts.Token, "token", "",
		"token that authenticates actions and pages (env "+envDashboardToken+"; generated when neither is set)")
	cmd.Flags().StringVar(&tokensFile, "tokens-file", "",
		"a file of NAME TOKEN lines: one token per person, whose actions are recorded as dashboard:NAME (env "+envDashboardTokensFile+")")
	cmd.Flags().BoolVar(&opts.ReadOnly, "read-only", false, "refuse every action (retry, cancel, delete, pause, resume, schedule changes)")
	cmd.Flags().StringVar(&opts.LogFormat, "log-format", cmp.Or(os.Getenv("TASKORCH_LOG_FORMAT"), "text"), "text or json (env TASKORCH_LOG_FORMAT)")
	cmd.Flags().StringVar(&opts.LogLevel, "log-level", cmp.Or(os.Getenv("TASKORCH_LOG_LEVEL"), "info"), "debug, info, warn or error (env TASKORCH_LOG_LEVEL)")
	cmd.Flags().BoolVar(&opts.AccessLog, "access-log", os.Getenv("TASKORCH_DASHBOARD_ACCESS_LOG") == "true",
		"log every request at info level: method, path, status, bytes, duration, remote address and who (env TASKORCH_DASHBOARD_ACCESS_LOG=true)")
	return cmd
}

// readTokensFile reads the named tokens of --tokens-file: "NAME TOKEN" a line, blank lines and
// lines starting with # skipped. A malformed line or a name given twice is a usage error that
// names the line (never the token).
func readTokensFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the operator's own file
	if err != nil {
		return nil, usageErrorf("--tokens-file: %v", err)
	}
	tokens := map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, usageErrorf("--tokens-file %s, line %d: want NAME TOKEN, got %d fields", path, i+1, len(fields))
		}
		if _, dup := tokens[fields[0]]; dup {
			return nil, usageErrorf("--tokens-file %s, line %d: %q is named twice", path, i+1, fields[0])
		}
		tokens[fields[0]] = fields[1]
	}
	if len(tokens) == 0 {
		return nil, usageErrorf("--tokens-file %s holds no token", path)
	}
	return tokens, nil
}

// dashboardOptions configures startDashboard.
type dashboardOptions struct {
	Addr     string            // host:port; port 0 picks a free one
	Token    string            // empty: generate one (unless ReadOnly or Tokens)
	Tokens   map[string]string // named tokens (dashboard.Config.Tokens)
	ReadOnly bool              // refuse every action
	Log      io.Writer         // the server's error log; nil: discarded
	ReadPool *pgxpool.Pool     // a read replica the pages read from; nil: pool

	LogFormat string // text (default) or json
	LogLevel  string // debug, info (default), warn or error
	AccessLog bool   // a line per request (dashboard.Config.AccessLog)
}

// runningDashboard is a dashboard being served: by `taskorch dashboard`, and by `taskorch dev`.
type runningDashboard struct {
	URL            string // http://host:port/
	Token          string // the token in use, "" when read-only without one
	TokenGenerated bool
	Named          int // how many named tokens (--tokens-file)
	ReadOnly       bool

	srv  *http.Server
	h    *dashboard.Handler
	done chan error
}

// startDashboard listens on opts.Addr and serves the dashboard over pool until Stop.
func startDashboard(ctx context.Context, pool *pgxpool.Pool, opts dashboardOptions) (*runningDashboard, error) {
	d := &runningDashboard{Token: opts.Token, Named: len(opts.Tokens), ReadOnly: opts.ReadOnly, done: make(chan error, 1)}
	if d.Token == "" && !opts.ReadOnly && len(opts.Tokens) == 0 {
		d.Token, d.TokenGenerated = dashboard.NewToken(), true
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	logger, err := newLogger(logw, cmp.Or(opts.LogFormat, "text"), cmp.Or(opts.LogLevel, "info"))
	if err != nil {
		return nil, err
	}
	logger = logger.With("component", "dashboard")
	h, err := dashboard.New(pool, dashboard.Config{Token: d.Token, Tokens: opts.Tokens, ReadOnly: opts.ReadOnly, Logger: logger,
		ReadPool: opts.ReadPool, AccessLog: opts.AccessLog})
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: listen on %s: %w", opts.Addr, err)
	}
	d.URL = "http://" + ln.Addr().String() + "/"
	d.h = h
	d.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	go func() {
		err := d.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		d.done <- err
	}()
	return d, nil
}

// Stop stops serving, letting requests in flight finish until ctx is done.
func (d *runningDashboard) Stop(ctx context.Context) error {
	d.h.Close() // the API's waits answer at once: Shutdown need not wait for them
	err := d.srv.Shutdown(ctx)
	if serveErr := <-d.done; serveErr != nil && err == nil {
		err = serveErr
	}
	return err
}

// printDashboard prints the dashboard's URL on a line of its own, and how to sign in.
func printDashboard(w io.Writer, d *runningDashboard) {
	fmt.Fprintln(w, "Dashboard:")
	fmt.Fprintln(w, d.URL)
	switch {
	case d.TokenGenerated:
		fmt.Fprintf(w, "Sign in with this token (generated for this run; set --token or %s to choose one):\n%s\n", envDashboardToken, d.Token)
	case d.Token != "":
		fmt.Fprintln(w, "Sign in with the token given by --token or "+envDashboardToken+".")
	case d.Named > 0:
		fmt.Fprintf(w, "Sign in with your token from --tokens-file (%d %s).\n", d.Named, plural(int64(d.Named), "name", "names"))
	}
	if d.ReadOnly {
		fmt.Fprintln(w, "Read-only: every action (retry, cancel, delete, pause, resume, schedule changes) is off.")
	}
}
