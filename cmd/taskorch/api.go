package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/cmd/taskorch/internal/failover"
	"github.com/taskorch/taskorch/internal/httpapi"
)

// The HTTP API's variables (docs/configuration.md, "HTTP API").
const (
	envAPITokens     = "TASKORCH_API_TOKENS"      //nolint:gosec // the variable's name, not a credential
	envAPITokensFile = "TASKORCH_API_TOKENS_FILE" //nolint:gosec // the variable's name, not a credential
	envAPIRoles      = "TASKORCH_API_ROLES"
)

// apiFlags are `taskorch api`'s settings.
type apiFlags struct {
	addr, roles, tokensFile string
	maxWait                 time.Duration
	maxConns                int
	logFormat, logLevel     string
}

func newAPICmd(g *globals) *cobra.Command {
	var f apiFlags
	var envErr error
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Serve the HTTP API (enqueue, get, list, wait, cancel, retry, signal)",
		Long: `Serves taskorch's HTTP API (docs/api.md; openapi.yaml describes it): enqueue a task, get one,
list them, wait for one to finish (long poll), cancel, retry, and send a signal, as JSON.

Every request carries "Authorization: Bearer <token>", and each token maps to a PostgreSQL
role: the request runs in a transaction as that role (SET LOCAL ROLE), so it can do exactly
what the role's grants allow (403 otherwise). Tokens come from TASKORCH_API_TOKENS (ROLE=TOKEN
pairs, comma-separated; no flag, so they never show in ps) and from --tokens-file
(TASKORCH_API_TOKENS_FILE: a ROLE=TOKEN line each, # comments); a role may have several tokens,
which is how a token is rotated, and SIGHUP reads the file again without a restart. --roles (TASKORCH_API_ROLES) is the allow-list: every role a
token names must be in it. At start each role must exist, must not be a superuser, and the
login role of DATABASE_URL must be a member of it (grant ROLE to LOGIN): the command refuses to
start otherwise, naming the role, never a token. GET /healthz answers ok.`,
		Example: `  TASKORCH_API_TOKENS=app_user=$(openssl rand -hex 32) taskorch api --roles app_user
  TASKORCH_API_TOKENS_FILE=/etc/taskorch/api-tokens TASKORCH_API_ROLES=app_user,ops_user taskorch api --addr 0.0.0.0:8082`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if envErr != nil {
				return &usageError{err: envErr}
			}
			log, err := newLogger(cmd.ErrOrStderr(), f.logFormat, f.logLevel)
			if err != nil {
				return err
			}
			log = log.With("component", "api")
			tokens, roles, err := apiTokens(f)
			if err != nil {
				return err
			}
			if f.maxWait <= 0 {
				return usageErrorf("--max-wait (TASKORCH_API_MAX_WAIT) must be positive, got %s", f.maxWait)
			}
			if f.maxConns < 2 {
				return usageErrorf("--max-conns (TASKORCH_API_MAX_CONNS) must be at least 2, got %d", f.maxConns)
			}
			ctx := cmd.Context()
			pool, err := g.connectAPI(ctx, f.maxConns)
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := taskorch.CheckMigrations(ctx, pool, nil); err != nil {
				return fmt.Errorf("the API needs a migrated database (taskorch migrate up): %w", redact(err))
			}
			if err := checkAPIRoles(ctx, pool, roles); err != nil {
				return err
			}
			auth, err := httpapi.TokenAuth(tokens)
			if err != nil {
				return usageErrorf("API tokens: %v", err)
			}
			var current atomic.Pointer[func(*http.Request) (string, bool)]
			current.Store(&auth)
			authenticate := func(r *http.Request) (string, bool) { return (*current.Load())(r) }
			h, err := httpapi.New(pool, httpapi.Config{Authenticate: authenticate, Roles: roles, MaxWait: f.maxWait, Logger: log})
			if err != nil {
				return usageErrorf("%v", err)
			}
			defer h.Close()
			var lc net.ListenConfig
			ln, err := lc.Listen(ctx, "tcp", f.addr)
			if err != nil {
				return usageErrorf("--addr %s: %v", f.addr, err)
			}
			srv := &http.Server{
				Handler:           apiMux(h),
				ReadHeaderTimeout: 10 * time.Second,
				ReadTimeout:       30 * time.Second,
				WriteTimeout:      f.maxWait + 30*time.Second, // a wait's answer comes after up to --max-wait
				IdleTimeout:       2 * time.Minute,
				ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go reloadAPITokens(ctx, hup, f, roles, &current, log)
			log.Info("serving the HTTP API", "addr", ln.Addr().String(), "roles", strings.Join(roles, ","), "tokens", len(tokens))
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "api: http://%s/\n", ln.Addr())
			select {
			case <-ctx.Done():
			case err := <-done:
				return err
			}
			h.Close() // waits in progress answer 503 at once: Shutdown need not wait for them
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(stopCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	envString := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	envDuration := func(name string, def time.Duration) time.Duration {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			envErr = errors.Join(envErr, fmt.Errorf("%s=%q is not a Go duration such as 30s or 5m", name, v))
		}
		return d
	}
	envInt := func(name string, def int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		var n int
		if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != v {
			envErr = errors.Join(envErr, fmt.Errorf("%s=%q is not a whole number", name, v))
		}
		return n
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", envString("TASKORCH_API_ADDR", "127.0.0.1:8082"), "address to listen on (host:port; port 0 picks a free one) (env TASKORCH_API_ADDR)")
	fl.StringVar(&f.roles, "roles", "", "the roles tokens may map to, comma-separated: the allow-list (env "+envAPIRoles+")")
	fl.StringVar(&f.tokensFile, "tokens-file", "", "a file of ROLE=TOKEN lines, added to "+envAPITokens+" (env "+envAPITokensFile+")")
	fl.DurationVar(&f.maxWait, "max-wait", envDuration("TASKORCH_API_MAX_WAIT", 60*time.Second), "the longest a wait request waits; a longer timeout is cut to it (env TASKORCH_API_MAX_WAIT)")
	fl.IntVar(&f.maxConns, "max-conns", envInt("TASKORCH_API_MAX_CONNS", 20), "the database connections the API may hold (env TASKORCH_API_MAX_CONNS)")
	fl.StringVar(&f.logFormat, "log-format", envString("TASKORCH_LOG_FORMAT", "text"), "text or json (env TASKORCH_LOG_FORMAT)")
	fl.StringVar(&f.logLevel, "log-level", envString("TASKORCH_LOG_LEVEL", "info"), "debug, info, warn or error (env TASKORCH_LOG_LEVEL)")
	return cmd
}

// reloadAPITokens reads the tokens again at each SIGHUP (TASKORCH_API_TOKENS as the process
// got it, and --tokens-file as it is now) and serves with them from then on: a rotation without
// a restart. Tokens that cannot be read, or that name a role not on the allow-list, are
// refused with a log line naming the problem (never a token), and the tokens in use stay.
func reloadAPITokens(ctx context.Context, hup <-chan os.Signal, f apiFlags, roles []string,
	current *atomic.Pointer[func(*http.Request) (string, bool)], log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		tokens, newRoles, err := apiTokens(f)
		if err == nil && !slices.Equal(newRoles, roles) {
			err = errors.New("the allow-list (--roles, " + envAPIRoles + ") changed: restart to change it")
		}
		var auth func(*http.Request) (string, bool)
		if err == nil {
			auth, err = httpapi.TokenAuth(tokens)
		}
		if err != nil {
			log.Error("API tokens not reloaded: the tokens in use stay", "error", err.Error())
			continue
		}
		current.Store(&auth)
		log.Info("API tokens reloaded", "tokens", len(tokens))
	}
}

// apiOwnRoutes are the routes `taskorch api` serves besides the API's (openapi.yaml has both).
var apiOwnRoutes = []httpapi.Route{{Method: "GET", Path: "/healthz"}}

// apiMux is `taskorch api`'s handler: /healthz, and the API.
func apiMux(h *httpapi.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("/", h)
	return mux
}

// apiTokens reads the tokens (TASKORCH_API_TOKENS, then --tokens-file) and the allow-list, and
// checks that every token's role is allowed. Its errors name a role or an entry, never a token.
func apiTokens(f apiFlags) ([]httpapi.Token, []string, error) {
	rolesList := f.roles
	if rolesList == "" {
		rolesList = os.Getenv(envAPIRoles)
	}
	var roles []string
	for r := range strings.SplitSeq(rolesList, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if err := httpapi.ValidRole(r); err != nil {
			return nil, nil, usageErrorf("--roles (%s): %v", envAPIRoles, err)
		}
		if !slices.Contains(roles, r) {
			roles = append(roles, r)
		}
	}
	if len(roles) == 0 {
		return nil, nil, usageErrorf("no roles: set --roles or %s to the roles the API's tokens map to", envAPIRoles)
	}
	tokens, err := httpapi.ParseTokens(os.Getenv(envAPITokens))
	if err != nil {
		return nil, nil, usageErrorf("%s: %v", envAPITokens, err)
	}
	path := f.tokensFile
	if path == "" {
		path = os.Getenv(envAPITokensFile)
	}
	if path != "" {
		b, err := os.ReadFile(path) //nolint:gosec // the operator's own file
		if err != nil {
			return nil, nil, usageErrorf("--tokens-file: %v", err)
		}
		var lines []string
		for line := range strings.SplitSeq(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				lines = append(lines, line)
			}
		}
		more, err := httpapi.ParseTokens(strings.Join(lines, "\n"))
		if err != nil {
			return nil, nil, usageErrorf("--tokens-file %s: %v (one ROLE=TOKEN a line)", path, err)
		}
		tokens = append(tokens, more...)
	}
	if len(tokens) == 0 {
		return nil, nil, usageErrorf("no token: set %s (ROLE=TOKEN,...) or --tokens-file", envAPITokens)
	}
	for _, t := range tokens {
		if !slices.Contains(roles, t.Role) {
			return nil, nil, usageErrorf("a token maps to role %q, which is not in --roles (%s)", t.Role, envAPIRoles)
		}
	}
	return tokens, roles, nil
}

// checkAPIRoles checks each role in the database: it exists, is no superuser, and the login
// role is a member of it (SET ROLE needs that).
func checkAPIRoles(ctx context.Context, pool *pgxpool.Pool, roles []string) error {
	var login string
	if err := pool.QueryRow(ctx, `select session_user`).Scan(&login); err != nil {
		return fmt.Errorf("the API's login role: %w", redact(err))
	}
	for _, r := range roles {
		var exists, super, member bool
		err := pool.QueryRow(ctx, `select count(*) = 1, coalesce(bool_or(rolsuper), false), coalesce(bool_or(pg_has_role(session_user, oid, 'MEMBER')), false)
			from pg_catalog.pg_roles where rolname = $1`, r).Scan(&exists, &super, &member)
		switch {
		case err != nil:
			return fmt.Errorf("role %s: %w", r, redact(err))
		case !exists:
			return usageErrorf("role %q does not exist (create it and grant it what its tokens may do: docs/api.md, \"Roles\")", r)
		case super:
			return usageErrorf("role %q is a superuser: a token mapped to it could do anything; map tokens to roles with the grants they need", r)
		case !member:
			return usageErrorf("the API's login role %q is not a member of role %q, so it cannot act as it: grant %s to %s", login, r, r, login)
		}
	}
	return nil
}

// connectAPI is connect with a pool of up to maxConns connections: a request holds one for its
// transaction, and the waits share one more.
func (g *globals) connectAPI(ctx context.Context, maxConns int) (*pgxpool.Pool, error) {
	if g.databaseURL == "" {
		return nil, usageErrorf("no database: set DATABASE_URL or pass --database-url (taskorch dev prints one)")
	}
	cfg, err := pgxpool.ParseConfig(g.databaseURL)
	if err != nil {
		return nil, usageErrorf("DATABASE_URL is not a valid PostgreSQL URL: %v", redact(err))
	}
	cfg.MaxConns = int32(min(maxConns, 1000)) //nolint:gosec // bounded
	unnamedStatements(cfg, g.databaseURL)
	failover.NewGuard(nil).Install(&cfg.ConnConfig.Config)
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
