package dashboard

import (
	"context"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/admin"
)

// runningShown bounds the running tasks the running page lists.
const runningShown = 200

type runningData struct {
	Tasks []admin.RunningTask
	Type  string // the type filter, "" for all
	Limit int
}

// runningPage lists the running tasks that have run longest in their current attempt, with their
// worker, attempt, claim time and lease expiry: where a stuck task shows first.
func (h *Handler) runningPage(w http.ResponseWriter, r *http.Request) {
	d := runningData{Type: strings.TrimSpace(r.URL.Query().Get("type")), Limit: runningShown}
	var types []string
	if d.Type != "" {
		if err := taskorch.ValidateTaskType(d.Type); err != nil {
			h.fail(w, r, badRequestf("%s", strings.TrimPrefix(err.Error(), "taskorch: ")))
			return
		}
		types = []string{d.Type}
	}
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		d.Tasks, err = admin.RunningLongest(ctx, tx, runningShown, types)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "running", "Running longest", "running", d)
}
