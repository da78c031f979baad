package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/humanize"
)

// Cancelling a whole workflow (docs/workflows.md, "Cancelling a workflow"): the workflow page's
// "Cancel workflow" form posts here, behind the same authentication and CSRF check as every
// action; queues.cancel_workflow (through admin.CancelWorkflow, which tries rows held by
// another transaction again) does the work, recording who did it and the reason.

// maxCancelReason bounds the reason an operator gives.
const maxCancelReason = 500

func (h *Handler) cancelWorkflow(w http.ResponseWriter, r *http.Request, who identity) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, "not a workflow id: "+truncate(40, raw), http.StatusBadRequest)
		return
	}
	back := h.localPathOr(r.PostFormValue("return_to"), h.path("/workflows/"+strconv.FormatInt(id, 10)))
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if utf8.RuneCountInString(reason) > maxCancelReason {
		h.setFlash(w, r, "error", fmt.Sprintf("Not cancelled: the reason is longer than %d characters.", maxCancelReason))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.BulkTimeout)
	defer cancel()
	res, err := admin.CancelWorkflow(ctx, h.pool, id, who.actor(), reason)
	switch {
	case errors.Is(err, admin.ErrWorkflowNotFound):
		h.setFlash(w, r, "error", fmt.Sprintf("Not cancelled: there is no workflow %d.", id))
	case err != nil:
		h.cfg.Logger.Error("dashboard: cancel workflow failed", "workflow_id", id, "error", err)
		h.setFlash(w, r, "error", "Not cancelled: "+strings.TrimPrefix(redactText(err.Error()), admin.ErrInvalidInput.Error()+": "))
	case res.Skipped > 0:
		h.setFlash(w, r, "error", fmt.Sprintf("Cancelled %s %s of workflow %d; %s busy (held by another transaction): press again to take %s.",
			humanize.Thousands(res.Cancelled), plural(res.Cancelled, "task", "tasks"), id,
			humanize.Thousands(res.Skipped), plural(res.Skipped, "it", "them")))
	case res.Cancelled == 0:
		h.setFlash(w, r, "ok", fmt.Sprintf("Workflow %d had no task left to cancel.", id))
	default:
		h.setFlash(w, r, "ok", fmt.Sprintf("Cancelled workflow %d: %s %s.", id, humanize.Thousands(res.Cancelled), plural(res.Cancelled, "task", "tasks")))
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
