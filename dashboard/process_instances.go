package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskorch/taskorch/internal/admin"
)

// The registered processes' instances and their states (docs/processes.md, "Seeing
// processes"): the overview's "Failed processes" card, the instances page, and on an instance's
// page its state, its parent and the instances it started. All of it reads through
// queues.process_instances, queues.process_instance_counts and the instances views
// (internal/admin/processes.go).

// failedProcesses is the overview's card: the failed instances of each registered process.
type failedProcesses struct {
	Processes []failedCount // those with a failed instance
	Total     int64
	Cap       int64
	Note      string // why the card is empty although it may not be (no privilege)
}

// optional runs fn in a subtransaction of tx: when the dashboard's role may not read what fn
// reads, the page goes on without it and says why.
func optional(ctx context.Context, tx pgx.Tx, fn func(tx pgx.Tx) error) (note string, err error) {
	sub, err := tx.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = sub.Rollback(ctx) }()
	err = fn(sub)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return "The dashboard's database role may not read the process registry (" + pgErr.Message +
			"); grant it execute on queues.process_instances and queues.process_instance_counts (docs/security.md).", nil
	}
	if err != nil {
		return "", err
	}
	return "", sub.Commit(ctx)
}

// failedCount is a process's count of failed instances (at most countCap).
type failedCount struct {
	Process, Title string
	Failed         int64
}

func readFailedProcesses(ctx context.Context, tx pgx.Tx) (failedProcesses, error) {
	c := failedProcesses{Cap: countCap}
	note, err := optional(ctx, tx, func(tx pgx.Tx) error {
		counts, err := admin.ProcessInstanceCounts(ctx, tx, countCap, []string{"failed"})
		if err != nil {
			return err
		}
		for _, p := range counts {
			if p.Failed != nil && *p.Failed > 0 {
				c.Processes = append(c.Processes, failedCount{Process: p.Process, Title: p.Title, Failed: *p.Failed})
				c.Total += *p.Failed
			}
		}
		return nil
	})
	c.Note = note
	return c, err
}

// instancesPageLimit bounds the instances page.
const instancesPageLimit = 200

type instancesPageData struct {
	Instances []admin.ProcessInstance
	State     string
	Process   string
	States    []string
	Processes []string // the registered processes, for the filter
	Limit     int
	Note      string
}

// Query is the page's filter as a query string, with state replaced (for the state links).
func (d instancesPageData) Query(state string) string {
	v := url.Values{}
	if state != "" {
		v.Set("state", state)
	}
	if d.Process != "" {
		v.Set("process", d.Process)
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// processInstancesPage lists the registered processes' instances, newest first, filtered by
// state (?state=failed) and process (?process=comms.send_email).
func (h *Handler) processInstancesPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := instancesPageData{State: q.Get("state"), Process: q.Get("process"), States: admin.ProcessStates, Limit: instancesPageLimit}
	if d.State != "" && !slices.Contains(admin.ProcessStates, d.State) {
		h.fail(w, r, badRequestf("state must be one of %s", strings.Join(admin.ProcessStates, ", ")))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > instancesPageLimit {
			h.fail(w, r, badRequestf("limit must be between 1 and %d", instancesPageLimit))
			return
		}
		d.Limit = n
	}
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		d.Note, err = optional(ctx, tx, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `select coalesce(array_agg(process order by process), '{}') from queues.process`).Scan(&d.Processes); err != nil {
				return err
			}
			if d.Process != "" && !slices.Contains(d.Processes, d.Process) {
				return notFoundf("no registered process %q", truncate(80, d.Process))
			}
			d.Instances, err = admin.ListProcessInstances(ctx, tx, admin.ProcessFilter{State: d.State, Process: d.Process, Limit: d.Limit})
			return err
		})
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	title := "Process instances"
	if d.State != "" {
		title = capitalize(d.State) + " processes"
	}
	h.render(w, r, http.StatusOK, "process_instances", title, "processes", d)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// instanceState is what the instances view says of an instance shown on its page, with its
// parent and the instances it started. Absent (Known false) for a process that is found by the
// naming pattern but not registered.
type instanceState struct {
	Known    bool
	Instance admin.ProcessInstance
	Children []admin.ProcessInstance
	Note     string
}

func readInstanceState(ctx context.Context, tx pgx.Tx, process string, id int64) (instanceState, error) {
	var s instanceState
	note, err := optional(ctx, tx, func(tx pgx.Tx) error {
		x, err := admin.GetProcessInstance(ctx, tx, process, id)
		if errors.Is(err, admin.ErrProcessNotFound) || errors.Is(err, admin.ErrInstanceNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		s.Known, s.Instance = true, *x
		s.Children, err = admin.ProcessChildren(ctx, tx, process, id)
		return err
	})
	s.Note = note
	return s, err
}
