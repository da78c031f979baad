// Package httpapi is taskorch's HTTP API (docs/api.md, described by openapi.yaml): enqueue, get,
// list, wait, cancel, retry and signal as JSON over HTTP, for programs in any language. It is
// served by `taskorch api` and by the dashboard under /api.
//
// Every request acts as a PostgreSQL role: its bearer token maps to one (Config.Authenticate),
// and the request runs in a transaction that begins with SET LOCAL ROLE to it, so the API can do
// exactly what that role's grants allow. The operations call the Go client's Tx methods, that
// is the SQL API's functions, with parameters; the role's name is checked against an allow-list
// and quoted as an identifier.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
)

// Route is one route the API serves: a method and a path pattern as net/http's mux reads it
// ("/v1/tasks/{id}"), without Config.Prefix.
type Route struct {
	Method string
	Path   string
}

// Config configures a Handler.
type Config struct {
	// Authenticate returns the role a request acts as, from its credentials (TokenAuth checks
	// bearer tokens); ok false answers 401. Required.
	Authenticate func(r *http.Request) (role string, ok bool)

	// Roles is the allow-list of roles a request may act as: a role Authenticate returns that
	// is not in it is refused (403) before anything reaches the database. Required.
	Roles []string

	// Prefix is the path the API is mounted at, without a trailing slash (the dashboard's
	// "/api"); routes are Prefix + "/v1/...". Defaults to "".
	Prefix string

	// ReadOnly refuses every route that writes (enqueue, cancel, retry, signal) with 403: the
	// dashboard's read-only mode. Defaults to false.
	ReadOnly bool

	// MaxWait bounds a wait request's timeout. Defaults to 60s.
	MaxWait time.Duration

	// QueryTimeout bounds each request's database work (a wait's own timeout comes on top).
	// Defaults to 10s.
	QueryTimeout time.Duration

	// Logger receives the errors a request answered 500 with (masked: never a token, a
	// password or a DSN). Defaults to slog.Default().
	Logger *slog.Logger
}

// Handler serves the API. Make it with New.
type Handler struct {
	pool   *pgxpool.Pool
	client *taskorch.Client
	cfg    Config
	roles  map[string]bool
	mux    *http.ServeMux
	routes []Route
}

// rolePattern is what a role name may be: 1 to 63 ASCII letters, digits, "_", "$" and "-",
// starting with a letter or "_". It is quoted as an identifier whatever it is.
var rolePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$-]{0,62}$`)

// ValidRole returns an error unless role is a plain role name: 1 to 63 ASCII letters, digits,
// "_", "$" or "-", starting with a letter or "_".
func ValidRole(role string) error {
	if !rolePattern.MatchString(role) {
		return fmt.Errorf("role %q is not a plain SQL identifier: use 1 to 63 letters, digits, \"_\", \"$\" or \"-\", starting with a letter or \"_\"", role)
	}
	return nil
}

const defaultMaxWait = 60 * time.Second

// New returns the API over pool. The pool's login role must be a member of every role in
// cfg.Roles (docs/api.md, "Roles"); a wait also reads through the pool's own role
// (queues.watch_task and queues.task).
func New(pool *pgxpool.Pool, cfg Config) (*Handler, error) {
	if pool == nil {
		return nil, errors.New("httpapi: New needs a *pgxpool.Pool")
	}
	if cfg.Authenticate == nil {
		return nil, errors.New("httpapi: Config.Authenticate is required")
	}
	if len(cfg.Roles) == 0 {
		return nil, errors.New("httpapi: Config.Roles (the roles requests may act as) is required")
	}
	roles := map[string]bool{}
	for _, r := range cfg.Roles {
		if err := ValidRole(r); err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
		roles[r] = true
	}
	cfg.Prefix = strings.TrimRight(cfg.Prefix, "/")
	if cfg.Prefix != "" && !strings.HasPrefix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("httpapi: Prefix %q must start with /", cfg.Prefix)
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = defaultMaxWait
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	client, err := taskorch.NewClient(pool, nil)
	if err != nil {
		return nil, err
	}
	h := &Handler{pool: pool, client: client, cfg: cfg, roles: roles, mux: http.NewServeMux()}
	h.route("POST", "/v1/tasks", true, h.enqueue)
	h.route("GET", "/v1/tasks", false, h.list)
	h.route("GET", "/v1/tasks/{id}", false, h.get)
	h.route("GET", "/v1/tasks/{id}/wait", false, h.wait)
	h.route("POST", "/v1/tasks/{id}/cancel", true, h.cancel)
	h.route("POST", "/v1/tasks/{id}/retry", true, h.retry)
	h.route("POST", "/v1/signals", true, h.signal)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path+" (docs/api.md lists the routes)")
	})
	return h, nil
}

// Close ends the waits in progress (they answer 503) and releases the connection they listen
// on. Close it before the pool.
func (h *Handler) Close() { _ = h.client.Close() }

// Routes returns the routes the handler serves, in the order they were registered.
func (h *Handler) Routes() []Route { return slices.Clone(h.routes) }

// route registers one route: authentication, the allow-list, read-only mode, then fn.
func (h *Handler) route(method, path string, writes bool, fn func(w http.ResponseWriter, r *http.Request, role string)) {
	h.routes = append(h.routes, Route{Method: method, Path: path})
	h.mux.HandleFunc(method+" "+h.cfg.Prefix+path, func(w http.ResponseWriter, r *http.Request) {
		role, ok := h.cfg.Authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="taskorch"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "send a valid token as Authorization: Bearer <token>")
			return
		}
		if !h.roles[role] || ValidRole(role) != nil {
			writeError(w, http.StatusForbidden, "forbidden", "this token's role is not in the API's allowed roles (TASKORCH_API_ROLES)")
			return
		}
		if writes && h.cfg.ReadOnly {
			writeError(w, http.StatusForbidden, "forbidden", "the API is read-only here")
			return
		}
		fn(w, r, role)
	})
}

// ServeHTTP serves the API's routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.mux.ServeHTTP(w, r)
}

// inRole runs fn in a transaction acting as role: SET LOCAL ROLE, with the role quoted as an
// identifier (it is also on the allow-list, checked by route). It commits when fn returns nil.
func (h *Handler) inRole(ctx context.Context, role string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.QueryTimeout)
	defer cancel()
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "set local role "+pgx.Identifier{role}.Sanitize()); err != nil {
		return fmt.Errorf("set role: %w", err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("set local statement_timeout = %d", h.cfg.QueryTimeout.Milliseconds())); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
