package dashboard

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
)

func (h *Handler) schedulesPage(w http.ResponseWriter, r *http.Request) {
	var ss []taskorch.Schedule
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		ss, err = h.client.SchedulesTx(ctx, tx)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "schedules", "Schedules", "schedules", ss)
}
