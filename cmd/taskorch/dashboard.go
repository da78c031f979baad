package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch/dashboard"
)

// envDashboardToken is the dashboard token's environment variable (--token's twin).
const envDashboardToken = "TASKORCH_DASHBOARD_TOKEN" //nolint:gosec // the variable's name, not a credential

func newDashboardCmd(g *globals) *cobra.Command {
	var opts dashboardOptions
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the web dashboard",
		Long: `Serves the web dashboard (docs/dashboard.md): every task, lease, event, error, process, worker,
schedule and outbox message of the database, with retry, cancel, pause and resume.

Actions need the token (--token or TASKORCH_DASHBOARD_TOKEN; without one a token is generated
and printed): sign in with it on the page, or send it as "Authorization: Bearer <token>".
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
	cmd.Flags().BoolVar(&opts.ReadOnly, "read-only", false, "refuse every action (retry, cancel, pause, resume)")
	return cmd
}

// dashboardOptions configures startDashboard.
type dashboardOptions struct {
	Addr     string        // host:port; port 0 picks a free one
	Token    string        // empty: generate one (unless ReadOnly)
	ReadOnly bool          // refuse every action
	Log      io.Writer     // the server's error log; nil: discarded
	ReadPool *pgxpool.Pool // a read replica the pages read from; nil: pool
}

// runningDashboard is a dashboard being served: by `taskorch dashboard`, and by `taskorch dev`.
type runningDashboard struct {
	URL            string // http://host:port/
	Token          string // the token in use, "" when read-only without one
	TokenGenerated bool
	ReadOnly       bool

	srv  *http.Server
	done chan error
}

// startDashboard listens on opts.Addr and serves the dashboard over pool until Stop.
func startDashboard(ctx context.Context, pool *pgxpool.Pool, opts dashboardOptions) (*runningDashboard, error) {
	d := &runningDashboard{Token: opts.Token, ReadOnly: opts.ReadOnly, done: make(chan error, 1)}
	if d.Token == "" && !opts.ReadOnly {
		d.Token, d.TokenGenerated = dashboard.NewToken(), true
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	logger := slog.New(slog.NewTextHandler(logw, nil)).With("component", "dashboard")
	h, err := dashboard.New(pool, dashboard.Config{Token: d.Token, ReadOnly: opts.ReadOnly, Logger: logger, ReadPool: opts.ReadPool})
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: listen on %s: %w", opts.Addr, err)
	}
	d.URL = "http://" + ln.Addr().String() + "/"
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
	}
	if d.ReadOnly {
		fmt.Fprintln(w, "Read-only: retry, cancel, pause and resume are off.")
	}
}
