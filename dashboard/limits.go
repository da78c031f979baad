package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch"
)

// limitsData is the limits page: every limit and each of its buckets in use (queues.limit_status).
type limitsData struct {
	Usage []limitRow
}

type limitRow struct {
	taskorch.LimitUsage
	Limit  string // the limit in words
	Tokens string // the tokens now, "" without a rate
	Full   bool   // no free running slot, or no whole token: its due tasks wait
}

func (h *Handler) limitsPage(w http.ResponseWriter, r *http.Request) {
	var d limitsData
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		us, err := h.client.LimitUsageTx(ctx, tx)
		for _, u := range us {
			row := limitRow{LimitUsage: u, Limit: u.String(), Full: limitFull(u)}
			if u.Tokens != nil {
				row.Tokens = strconv.FormatFloat(*u.Tokens, 'f', 1, 64)
			}
			d.Usage = append(d.Usage, row)
		}
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "limits", "Limits", "limits", d)
}

// limitFull reports a bucket that lets nothing more start now.
func limitFull(u taskorch.LimitUsage) bool {
	return (u.MaxRunning > 0 && u.Running >= int64(u.MaxRunning)) || (u.Tokens != nil && *u.Tokens < 1)
}

// heldBy says why a pending, due task of a limited type waits, from its bucket's row of
// queues.limit_status: "held by limit email: 2/s (burst 1); next token in 0.4 s". Empty when
// the task is not pending or its type has no limit.
func (h *Handler) heldBy(ctx context.Context, tx pgx.Tx, t *taskorch.Task) (string, error) {
	if t.Status != taskorch.StatusPending {
		return "", nil
	}
	var u taskorch.LimitUsage
	err := tx.QueryRow(ctx, `
		select s.task_type, coalesce(s.max_running, 0), coalesce(s.rate_per_second, 0), coalesce(s.burst, 0),
		       coalesce(s.key_field, ''), coalesce(s.key, ''), s.null_key, s.running, s.held, s.tokens
		from queues.task t
		join queues.limit_status s on s.task_type = t.limit_name
		 and case when t.limit_key = '*' then s.null_key
		          when t.limit_key like '=%' then s.key = substr(t.limit_key, 2)
		          else s.key is null and not s.null_key end
		where t.task_id = $1`, t.ID).
		Scan(&u.TaskType, &u.MaxRunning, &u.RatePerSecond, &u.Burst, &u.KeyField, &u.Key, &u.NullKey, &u.Running, &u.Held, &u.Tokens)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	s := "limit " + u.TaskType + ": " + u.String()
	switch {
	case u.NullKey:
		s += " (this task's " + u.KeyField + " is missing or not a scalar: the null-key bucket)"
	case u.KeyField != "":
		s += " (" + u.KeyField + " " + u.Key + ")"
	}
	var why []string
	if u.MaxRunning > 0 && u.Running >= int64(u.MaxRunning) {
		why = append(why, fmt.Sprintf("%d of %d running", u.Running, u.MaxRunning))
	}
	if u.Tokens != nil && *u.Tokens < 1 && u.RatePerSecond > 0 {
		why = append(why, fmt.Sprintf("next token in %.1f s", (1-*u.Tokens)/u.RatePerSecond))
	}
	if len(why) == 0 {
		return s + "; room now: it starts at the next claim", nil
	}
	return "held by " + s + "; " + strings.Join(why, ", "), nil
}
