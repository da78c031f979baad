package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/taskorch/taskorch"
)

// maxBulk bounds how many tasks one bulk action touches.
const maxBulk = 1000

// The actions answer with a redirect (303) to the page they came from (the form's return_to,
// when it is a dashboard path) and a one-time message.

func (h *Handler) retryTask(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, "retry", []string{r.PathValue("id")}, h.path("/tasks/"+r.PathValue("id")))
}

func (h *Handler) cancelTask(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, "cancel", []string{r.PathValue("id")}, h.path("/tasks/"+r.PathValue("id")))
}

func (h *Handler) retryTasks(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, "retry", r.PostForm["id"], h.path("/dead"))
}

func (h *Handler) cancelTasks(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, "cancel", r.PostForm["id"], h.path("/dead"))
}

// taskAction retries or cancels the tasks, each on its own (one that may not be retried does
// not stop the others), and reports what happened.
func (h *Handler) taskAction(w http.ResponseWriter, r *http.Request, op string, rawIDs []string, fallback string) {
	back := h.localPathOr(r.PostFormValue("return_to"), fallback)
	if len(rawIDs) == 0 {
		h.setFlash(w, r, "error", "No task selected.")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	if len(rawIDs) > maxBulk {
		http.Error(w, fmt.Sprintf("at most %d tasks at once", maxBulk), http.StatusBadRequest)
		return
	}
	ids := make([]int64, 0, len(rawIDs))
	for _, s := range rawIDs {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			http.Error(w, "not a task id: "+truncate(40, s), http.StatusBadRequest)
			return
		}
		ids = append(ids, id)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	var done []string
	var refused []string
	for _, id := range ids {
		var err error
		if op == "retry" {
			_, err = h.client.Retry(ctx, id)
		} else {
			_, err = h.client.Cancel(ctx, id)
		}
		switch {
		case err == nil:
			done = append(done, strconv.FormatInt(id, 10))
		case errors.Is(err, taskorch.ErrWrongState), errors.Is(err, taskorch.ErrNotFound):
			refused = append(refused, strings.TrimPrefix(err.Error(), op+" task "+strconv.FormatInt(id, 10)+": taskorch: "))
		default:
			h.cfg.Logger.Error("dashboard: "+op+" failed", "task_id", id, "error", err)
			refused = append(refused, fmt.Sprintf("task %d: %s", id, redactText(err.Error())))
		}
	}
	verb := map[string]string{"retry": "Retried", "cancel": "Cancelled"}[op]
	var msg []string
	if len(done) == 1 {
		msg = append(msg, verb+" task "+done[0]+".")
	} else if len(done) > 1 {
		msg = append(msg, fmt.Sprintf("%s %d tasks.", verb, len(done)))
	}
	if len(refused) > 0 {
		msg = append(msg, "Refused: "+strings.Join(refused, "; ")+".")
	}
	kind := "ok"
	if len(done) == 0 {
		kind = "error"
	}
	h.setFlash(w, r, kind, strings.Join(msg, " "))
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func (h *Handler) pauseQueue(w http.ResponseWriter, r *http.Request, who identity) {
	h.queueAction(w, r, who, true)
}

func (h *Handler) resumeQueue(w http.ResponseWriter, r *http.Request, who identity) {
	h.queueAction(w, r, who, false)
}

// queueAction pauses or resumes a task type (queues.pause_queue, queues.resume_queue); the
// pause records who did it ("dashboard", and the basic auth user).
func (h *Handler) queueAction(w http.ResponseWriter, r *http.Request, who identity, pause bool) {
	typ := r.PathValue("type")
	if typ == "_" { // the pause form for a type without tasks names it in a field
		typ = strings.TrimSpace(r.PostFormValue("task_type"))
	}
	back := h.localPathOr(r.PostFormValue("return_to"), h.path("/queues"))
	if err := taskorch.ValidateTaskType(typ); err != nil {
		h.setFlash(w, r, "error", strings.TrimPrefix(err.Error(), "taskorch: "))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	var changed bool
	var err error
	by := "dashboard"
	if u, ok := strings.CutPrefix(string(who), "basic:"); ok {
		by += " (" + u + ")"
	}
	if pause {
		changed, err = h.client.PauseQueue(ctx, typ, by)
	} else {
		changed, err = h.client.ResumeQueue(ctx, typ)
	}
	switch {
	case err != nil:
		h.cfg.Logger.Error("dashboard: queue action failed", "task_type", typ, "error", err)
		h.setFlash(w, r, "error", redactText(err.Error()))
	case pause && changed:
		h.setFlash(w, r, "ok", "Paused "+typ+": its pending tasks wait until it is resumed.")
	case pause:
		h.setFlash(w, r, "ok", typ+" was already paused.")
	case changed:
		h.setFlash(w, r, "ok", "Resumed "+typ+".")
	default:
		h.setFlash(w, r, "ok", typ+" was not paused.")
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
