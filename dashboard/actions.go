package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/humanize"
)

// maxBulk bounds how many tasks one bulk action touches.
const maxBulk = 1000

// The actions answer with a redirect (303) to the page they came from (the form's return_to,
// when it is a dashboard path) and a one-time message. Each records who did it: the actor of
// the request's identity ("dashboard:<name>").

func (h *Handler) retryTask(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, who, admin.ActionRetry, []string{r.PathValue("id")}, h.path("/tasks/"+r.PathValue("id")))
}

func (h *Handler) cancelTask(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, who, admin.ActionCancel, []string{r.PathValue("id")}, h.path("/tasks/"+r.PathValue("id")))
}

func (h *Handler) deleteTask(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, who, admin.ActionDelete, []string{r.PathValue("id")}, h.path("/tasks"))
}

func (h *Handler) retryTasks(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, who, admin.ActionRetry, r.PostForm["id"], h.path("/dead"))
}

func (h *Handler) cancelTasks(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, who, admin.ActionCancel, r.PostForm["id"], h.path("/dead"))
}

func (h *Handler) deleteTasks(w http.ResponseWriter, r *http.Request, who identity) {
	h.taskAction(w, r, who, admin.ActionDelete, r.PostForm["id"], h.path("/dead"))
}

var actionVerbs = map[admin.TaskAction]string{admin.ActionRetry: "Retried", admin.ActionCancel: "Cancelled", admin.ActionDelete: "Deleted"}

// taskAction retries, cancels or deletes the tasks ticked (each on its own: one that may not be
// acted on does not stop the others), and reports what happened.
func (h *Handler) taskAction(w http.ResponseWriter, r *http.Request, who identity, action admin.TaskAction, rawIDs []string, fallback string) {
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
	outs, err := admin.ActOnTaskIDs(ctx, h.pool, action, ids, who.actor(), "")
	if err != nil {
		h.cfg.Logger.Error("dashboard: "+string(action)+" failed", "error", err)
		h.setFlash(w, r, "error", redactText(err.Error()))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	var done, refused []string
	for _, o := range outs {
		if msg := admin.Refusal(action, o); msg != "" {
			refused = append(refused, msg)
		} else {
			done = append(done, strconv.FormatInt(o.TaskID, 10))
		}
	}
	verb := actionVerbs[action]
	var msg []string
	if len(done) == 1 {
		msg = append(msg, verb+" task "+done[0]+".")
	} else if len(done) > 1 {
		msg = append(msg, fmt.Sprintf("%s %d tasks.", verb, len(done)))
	}
	if action == admin.ActionCancel && len(done) > 0 {
		msg = append(msg, h.cancelSpawned(ctx, done, who)...)
	}
	if len(refused) > 0 {
		msg = append(msg, "Refused: "+strings.Join(refused, "; ")+".")
	}
	kind := "ok"
	if len(done) == 0 {
		kind = "error"
	}
	if action == admin.ActionDelete && len(done) == 1 && len(ids) == 1 && strings.HasPrefix(back, h.path("/tasks/")) {
		back = h.path("/tasks") // its page is gone
	}
	h.setFlash(w, r, kind, strings.Join(msg, " "))
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// tasksMatching retries, cancels or deletes every task the listing's filter matches (all of
// them, not only a page), in batches that never wait for a lock (admin.ActOnMatching), for at
// most Config.BulkTimeout; the message says how many, and whether it stopped before the end.
func (h *Handler) tasksMatching(w http.ResponseWriter, r *http.Request, who identity) {
	back := h.localPathOr(r.PostFormValue("return_to"), h.path("/tasks"))
	action := admin.TaskAction(r.PathValue("action"))
	if !action.Valid() {
		http.Error(w, "unknown action "+truncate(20, string(action)), http.StatusNotFound)
		return
	}
	q := url.Values{}
	for _, k := range []string{"status", "type", "from", "to", "key"} {
		if v := r.PostFormValue(k); v != "" {
			q.Set(k, v)
		}
	}
	f, err := parseTaskFilter(q)
	if err == nil && f.Status == "" {
		err = badRequestf("choose a status first: an action on all matching tasks needs one")
	}
	if err != nil {
		h.setFlash(w, r, "error", err.Error())
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	filter := admin.TaskFilter{Statuses: []string{f.Status}, IdempotencyKey: f.Key, EnqueuedSince: f.from, EnqueuedUntil: f.to}
	if f.Type != "" {
		filter.Types = []string{f.Type}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.BulkTimeout)
	defer cancel()
	res, err := admin.ActOnMatching(ctx, h.pool, action, filter, who.actor(), "", 0, nil)
	verb := actionVerbs[action]
	switch {
	case err != nil && res.Batches == 0:
		h.cfg.Logger.Error("dashboard: "+string(action)+" matching failed", "error", err)
		h.setFlash(w, r, "error", strings.TrimPrefix(redactText(err.Error()), admin.ErrInvalidInput.Error()+": "))
	case err != nil:
		h.setFlash(w, r, "error", fmt.Sprintf("%s %s matching %s before stopping (%s); press again to go on.",
			verb, humanize.Thousands(res.Done), plural(res.Done, "task", "tasks"), redactText(err.Error())))
	default:
		msg := fmt.Sprintf("%s all %s matching %s.", verb, humanize.Thousands(res.Done), plural(res.Done, "task", "tasks"))
		if res.Skipped > 0 {
			msg = fmt.Sprintf("%s %s matching %s; %s skipped (held by another transaction, or changed meanwhile): press again to take them.",
				verb, humanize.Thousands(res.Done), plural(res.Done, "task", "tasks"), humanize.Thousands(res.Skipped))
		}
		h.setFlash(w, r, "ok", msg)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (h *Handler) pauseQueue(w http.ResponseWriter, r *http.Request, who identity) {
	h.queueAction(w, r, who, true)
}

func (h *Handler) resumeQueue(w http.ResponseWriter, r *http.Request, who identity) {
	h.queueAction(w, r, who, false)
}

// queueAction pauses or resumes a task type (queues.pause_queue, queues.resume_queue); the
// pause records who did it ("dashboard:<name>").
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
	if pause {
		changed, err = h.client.PauseQueue(ctx, typ, who.actor())
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
