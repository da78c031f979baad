package dashboard

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/maintenance"
)

func (h *Handler) schedulesPage(w http.ResponseWriter, r *http.Request) {
	var ss []maintenance.Schedule
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		ss, err = maintenance.ListSchedules(ctx, tx)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "schedules", "Schedules", "schedules", ss)
}
