package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/admin"
)

// Retrying a failed process instance by hand (docs/processes.md, "Retrying a failed
// process"): the instance page's "Retry process" form posts the reason here, behind the same
// authentication and CSRF check as every action; queues.retry_process does the work.

// retryState is what an instance's page shows of retrying it: the form (a failed instance of a
// process with a retry function), its restarts and the failures of the runs they restarted.
type retryState struct {
	CanRetry        bool
	Restarts        []admin.ProcessRestart
	EarlierFailures []admin.ProcessRunFailure
	History         []retryFact // the failures of restarted runs and the restarts, in order
	Note            string
}

// retryFact is a row of the page's restarts card: run n failed, then run n+1 restarted.
type retryFact struct {
	Kind   string // "run-failed" or "restart"
	Run    int
	At     time.Time
	By     string
	Detail string // the failure's error, or the restart's reason
}

func readRetryState(ctx context.Context, tx pgx.Tx, process string, id int64, state string) (retryState, error) {
	var s retryState
	note, err := optional(ctx, tx, func(tx pgx.Tx) error {
		r, err := admin.ReadProcessRestarts(ctx, tx, process, id)
		if err != nil {
			return err
		}
		s.CanRetry = r.Retryable && state == "failed"
		s.Restarts, s.EarlierFailures = r.Restarts, r.EarlierFailures
		for _, f := range r.EarlierFailures {
			s.History = append(s.History, retryFact{Kind: "run-failed", Run: f.Run, At: f.At, Detail: f.Error})
		}
		for _, x := range r.Restarts {
			s.History = append(s.History, retryFact{Kind: "restart", Run: x.Run, At: x.RestartedAt, By: x.RestartedBy, Detail: x.Reason})
		}
		// Run n's failure, then the restart that began run n+1.
		sort.SliceStable(s.History, func(i, j int) bool {
			ri, rj := s.History[i].Run, s.History[j].Run
			if s.History[i].Kind == "restart" {
				ri--
			}
			if s.History[j].Kind == "restart" {
				rj--
			}
			return ri < rj || (ri == rj && s.History[i].Kind == "run-failed" && s.History[j].Kind == "restart")
		})
		return nil
	})
	s.Note = note
	return s, err
}

// retryProcess restarts the failed instance with the form's reason and comes back to its page
// with what happened: the run it started, or why it was refused.
func (h *Handler) retryProcess(w http.ResponseWriter, r *http.Request, _ identity) {
	process := r.PathValue("process")
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, "not an instance id: "+truncate(40, r.PathValue("id")), http.StatusBadRequest)
		return
	}
	back := h.path("/processes/" + process + "/" + strconv.FormatInt(id, 10))
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	x, err := admin.RetryProcessInstance(ctx, h.pool, process, id, r.PostFormValue("reason"))
	switch {
	case err == nil:
		h.setFlash(w, r, "ok", fmt.Sprintf("Restarted %s %d (run %d): new attempts start at the supervisor's next tick.", x.Process, x.ID, x.Run))
	case errors.Is(err, admin.ErrInvalidReason), errors.Is(err, admin.ErrNotRetryable),
		errors.Is(err, admin.ErrProcessNotFound), errors.Is(err, admin.ErrInstanceNotFound):
		h.setFlash(w, r, "error", "Retry refused: "+refusal(err))
	default:
		h.cfg.Logger.Error("dashboard: retry process failed", "process", truncate(120, process), "instance_id", id, "error", err)
		h.setFlash(w, r, "error", "Retry failed: "+redactText(err.Error()))
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// refusal is the database's message of a refused retry, without the sentinel's words.
func refusal(err error) string {
	msg := err.Error()
	for _, s := range []error{admin.ErrInvalidReason, admin.ErrNotRetryable, admin.ErrProcessNotFound, admin.ErrInstanceNotFound} {
		msg = strings.TrimPrefix(msg, s.Error()+": ")
	}
	return msg
}
