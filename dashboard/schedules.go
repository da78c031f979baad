package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/admin"
)

// scheduleEventsShown bounds the recent actions the schedules page lists.
const scheduleEventsShown = 20

type schedulesData struct {
	Schedules []taskorch.Schedule
	Events    []admin.ScheduleEvent
	LastEvent map[string]admin.ScheduleEvent // the latest action on each schedule, by name
	Now       string                         // now, UTC, as a datetime-local input's value
	Return    string
}

func (h *Handler) schedulesPage(w http.ResponseWriter, r *http.Request) {
	d := schedulesData{LastEvent: map[string]admin.ScheduleEvent{}, Return: h.path("/schedules")}
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if d.Schedules, err = h.client.SchedulesTx(ctx, tx); err != nil {
			return err
		}
		if d.Events, err = admin.ScheduleEvents(ctx, tx, "", scheduleEventsShown); err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `select now()`).Scan(&now); err != nil {
			return err
		}
		d.Now = now.UTC().Format("2006-01-02T15:04")
		return nil
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for i := len(d.Events) - 1; i >= 0; i-- { // newest last: it wins
		d.LastEvent[d.Events[i].Name] = d.Events[i]
	}
	h.render(w, r, http.StatusOK, "schedules", "Schedules", "schedules", d)
}

func (h *Handler) pauseSchedule(w http.ResponseWriter, r *http.Request, who identity) {
	h.scheduleAction(w, r, func(ctx context.Context, name string) (string, error) {
		changed, err := admin.PauseSchedule(ctx, h.pool, name, who.actor())
		if !changed {
			return "Schedule " + name + " was paused already.", err
		}
		return "Paused schedule " + name + ": no tick is enqueued until it is resumed.", err
	})
}

func (h *Handler) resumeSchedule(w http.ResponseWriter, r *http.Request, who identity) {
	h.scheduleAction(w, r, func(ctx context.Context, name string) (string, error) {
		changed, err := admin.ResumeSchedule(ctx, h.pool, name, who.actor())
		if !changed {
			return "Schedule " + name + " was not paused.", err
		}
		return "Resumed schedule " + name + " from its next tick (what it missed while paused is not replayed: backfill it).", err
	})
}

func (h *Handler) runSchedule(w http.ResponseWriter, r *http.Request, who identity) {
	h.scheduleAction(w, r, func(ctx context.Context, name string) (string, error) {
		id, err := admin.RunScheduleNow(ctx, h.pool, name, who.actor())
		return fmt.Sprintf("Enqueued task %d of schedule %s now.", id, name), err
	})
}

// backfillSchedule enqueues the ticks of the form's window (from and to, UTC; to defaults to
// now), each once.
func (h *Handler) backfillSchedule(w http.ResponseWriter, r *http.Request, who identity) {
	h.scheduleAction(w, r, func(ctx context.Context, name string) (string, error) {
		from, err := parseFilterTime(strings.TrimSpace(r.PostFormValue("from")))
		if err != nil {
			return "", fmt.Errorf("%w: the window's start: %s", admin.ErrInvalidInput, err.Error())
		}
		to := time.Now()
		if v := strings.TrimSpace(r.PostFormValue("to")); v != "" {
			if to, err = parseFilterTime(v); err != nil {
				return "", fmt.Errorf("%w: the window's end: %s", admin.ErrInvalidInput, err.Error())
			}
		}
		b, err := admin.BackfillSchedule(ctx, h.pool, name, from, to, who.actor(), false)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Backfilled schedule %s: %d %s from %s to %s, %d enqueued, %d enqueued already.", name,
			len(b.Ticks), plural(int64(len(b.Ticks)), "tick", "ticks"), b.From.Format(time.RFC3339), b.To.Format(time.RFC3339),
			b.Enqueued, b.Existing), nil
	})
}

// scheduleAction runs do on the schedule named in the path and reports its message, or why it
// was refused.
func (h *Handler) scheduleAction(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, name string) (string, error)) {
	name := r.PathValue("name")
	back := h.localPathOr(r.PostFormValue("return_to"), h.path("/schedules"))
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	msg, err := do(ctx, name)
	switch {
	case errors.Is(err, admin.ErrInvalidInput), errors.Is(err, admin.ErrScheduleNotFound):
		h.setFlash(w, r, "error", redactText(err.Error()))
	case err != nil:
		h.cfg.Logger.Error("dashboard: schedule action failed", "schedule", truncate(130, name), "error", err)
		h.setFlash(w, r, "error", redactText(err.Error()))
	default:
		h.setFlash(w, r, "ok", msg)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
