package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/httpapi"
)

// Handler is the dashboard: an http.Handler serving every page, action and asset under
// Config.Prefix. It is safe for concurrent use.
type Handler struct {
	pool   *pgxpool.Pool
	client *taskorch.Client
	cfg    Config
	mux    *http.ServeMux
	tpl    *templates
	dbName string           // user@host:port/database, never the password
	api    *httpapi.Handler // the HTTP API under /api; nil when off

	procMu    sync.Mutex
	procAt    time.Time
	procCache []process

	typesMu    sync.Mutex
	typesAt    time.Time
	typesCache []string
}

// New returns the dashboard over pool. The database must be migrated (taskorch.Migrate). The
// pool's role needs SELECT on the queues tables it shows and EXECUTE on the operator's
// functions for the actions (queues.retry_tasks, cancel_tasks, delete_tasks and their _matching
// forms, count_tasks_matching, pause_queue, resume_queue, pause_schedule, resume_schedule,
// run_schedule_now, backfill_schedule, cancel_workflow), and on queues.dashboard_session_revoked and
// queues.revoke_dashboard_session for sign-in sessions (docs/dashboard.md, "Sessions"); the
// owner of the schema has all of these (docs/security.md, "An operator's role").
func New(pool *pgxpool.Pool, cfg Config) (*Handler, error) {
	if pool == nil {
		return nil, errors.New("dashboard: New needs a *pgxpool.Pool")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	client, err := taskorch.NewClient(pool, nil)
	if err != nil {
		return nil, err
	}
	tpl, err := loadTemplates()
	if err != nil {
		return nil, err
	}
	cc := pool.Config().ConnConfig
	h := &Handler{
		pool:   pool,
		client: client,
		cfg:    cfg,
		tpl:    tpl,
		dbName: fmt.Sprintf("%s@%s:%d/%s", cc.User, cc.Host, cc.Port, cc.Database),
	}
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.view(h.overviewPage))
	m.HandleFunc("GET /tasks", h.view(h.tasksPage))
	m.HandleFunc("GET /tasks/{id}", h.view(h.taskPage))
	m.HandleFunc("GET /dead", h.view(h.deadPage))
	m.HandleFunc("GET /queues", h.view(h.queuesPage))
	m.HandleFunc("GET /processes", h.view(h.processesPage))
	m.HandleFunc("GET /processes/instances", h.view(h.processInstancesPage))
	m.HandleFunc("GET /processes/{process}", h.view(h.processPage))
	m.HandleFunc("GET /processes/{process}/{id}", h.view(h.processInstancePage))
	m.HandleFunc("GET /limits", h.view(h.limitsPage))
	m.HandleFunc("GET /workers", h.view(h.workersPage))
	m.HandleFunc("GET /running", h.view(h.runningPage))
	m.HandleFunc("GET /schedules", h.view(h.schedulesPage))
	m.HandleFunc("GET /outbox", h.view(h.outboxPage))
	m.HandleFunc("GET /workflows", h.view(h.workflowsPage))
	m.HandleFunc("GET /workflows/{id}", h.view(h.workflowPage))

	m.HandleFunc("POST /tasks/{id}/retry", h.action(h.retryTask))
	m.HandleFunc("POST /tasks/{id}/cancel", h.action(h.cancelTask))
	m.HandleFunc("POST /tasks/retry", h.action(h.retryTasks))
	m.HandleFunc("POST /tasks/cancel", h.action(h.cancelTasks))
	m.HandleFunc("POST /tasks/{id}/delete", h.action(h.deleteTask))
	m.HandleFunc("POST /tasks/delete", h.action(h.deleteTasks))
	m.HandleFunc("POST /bulk/{action}", h.action(h.tasksMatching))
	m.HandleFunc("POST /schedules/{name}/pause", h.action(h.pauseSchedule))
	m.HandleFunc("POST /schedules/{name}/resume", h.action(h.resumeSchedule))
	m.HandleFunc("POST /schedules/{name}/run", h.action(h.runSchedule))
	m.HandleFunc("POST /schedules/{name}/backfill", h.action(h.backfillSchedule))
	m.HandleFunc("POST /workers/quiet", h.action(h.quietWorker))
	m.HandleFunc("POST /workers/resume", h.action(h.resumeWorker))
	m.HandleFunc("POST /queues/{type}/pause", h.action(h.pauseQueue))
	m.HandleFunc("POST /queues/{type}/resume", h.action(h.resumeQueue))
	m.HandleFunc("POST /processes/{process}/{id}/retry", h.action(h.retryProcess))
	m.HandleFunc("POST /workflows/{id}/cancel", h.action(h.cancelWorkflow))

	h.mountAPI(m)

	m.HandleFunc("GET /login", h.loginPage)
	m.HandleFunc("POST /login", h.login)
	m.HandleFunc("POST /logout", h.logout)
	m.HandleFunc("GET /static/{file}", h.static)
	m.HandleFunc("/", h.notFound)
	h.mux = m
}

// ServeHTTP serves the dashboard. Paths outside Config.Prefix are not found.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.AccessLog {
		began, e := time.Now(), &accessEntry{}
		w = &accessWriter{ResponseWriter: w, e: e}
		r = r.WithContext(context.WithValue(r.Context(), accessKey{}, e))
		defer h.writeAccessLine(r, e, began) // r as it came: the path with its prefix
	}
	setSecurityHeaders(w.Header())
	if p := h.cfg.Prefix; p != "" {
		switch {
		case r.URL.Path == p:
			http.Redirect(w, r, p+"/", http.StatusMovedPermanently)
			return
		case strings.HasPrefix(r.URL.Path, p+"/"):
			r2 := new(http.Request)
			*r2 = *r
			u := *r.URL
			u.Path = strings.TrimPrefix(r.URL.Path, p)
			u.RawPath = ""
			r2.URL = &u
			r = r2
		default:
			http.NotFound(w, r)
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// path returns the URL path of a dashboard page: Prefix + p.
func (h *Handler) path(p string) string { return h.cfg.Prefix + p }

// readPool is where pages read: Config.ReadPool (a replica), or the primary.
func (h *Handler) readPool() *pgxpool.Pool {
	if h.cfg.ReadPool != nil {
		return h.cfg.ReadPool
	}
	return h.pool
}

// readTx runs fn in a read-only, repeatable-read transaction (one snapshot for the whole
// page) bounded by QueryTimeout. Plans are made for each query's actual values: the
// dashboard's filters decide which partial index applies, which a generic plan cannot see.
func (h *Handler) readTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.QueryTimeout)
	defer cancel()
	tx, err := h.readPool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf(`set local plan_cache_mode = force_custom_plan; set local statement_timeout = %d`,
		h.cfg.QueryTimeout.Milliseconds())); err != nil {
		return err
	}
	return fn(ctx, tx)
}
