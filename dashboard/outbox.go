package dashboard

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// outboxMessage is a row of queues.outbox_message: what a dev provider recorded instead of
// sending.
type outboxMessage struct {
	ID         int64
	TaskID     *int64
	Channel    string
	Recipient  *string
	Request    json.RawMessage
	Status     string
	Error      *string
	RecordedAt time.Time
}

type outboxData struct {
	Messages []outboxMessage
	Channel  string
	Status   string
	Channels []string
	Older    template.URL
	Newer    template.URL
}

var (
	outboxChannels = []string{"email", "sms", "file_delete"}
	outboxStatuses = []string{"sent", "failed"}
)

const outboxPageSize = 50

func (h *Handler) outboxPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := outboxData{Channel: q.Get("channel"), Status: q.Get("status"), Channels: outboxChannels}
	if d.Channel != "" && !slices.Contains(outboxChannels, d.Channel) {
		h.fail(w, r, badRequestf("unknown channel %q", truncate(40, d.Channel)))
		return
	}
	if d.Status != "" && !slices.Contains(outboxStatuses, d.Status) {
		h.fail(w, r, badRequestf("unknown status %q", truncate(40, d.Status)))
		return
	}
	var before, after int64
	for name, dst := range map[string]*int64{"before": &before, "after": &after} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				h.fail(w, r, badRequestf("%s must be an id", name))
				return
			}
			*dst = n
		}
	}
	var sb strings.Builder
	args := []any{}
	sb.WriteString(`select outbox_message_id, task_id, channel, recipient, request, status, error, recorded_at
from queues.outbox_message where true`)
	cond := func(sql string, v any) {
		args = append(args, v)
		sb.WriteString(" and " + strings.Replace(sql, "?", "$"+strconv.Itoa(len(args)), 1))
	}
	if d.Channel != "" {
		cond("channel = ?", d.Channel)
	}
	if d.Status != "" {
		cond("status = ?", d.Status)
	}
	order := "desc"
	switch {
	case after > 0:
		cond("outbox_message_id > ?", after)
		order = "asc"
	case before > 0:
		cond("outbox_message_id < ?", before)
	}
	args = append(args, outboxPageSize+1)
	sb.WriteString(" order by outbox_message_id " + order + " limit $" + strconv.Itoa(len(args)))
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sb.String(), args...)
		if err != nil {
			return err
		}
		d.Messages, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (outboxMessage, error) {
			var m outboxMessage
			err := r.Scan(&m.ID, &m.TaskID, &m.Channel, &m.Recipient, &m.Request, &m.Status, &m.Error, &m.RecordedAt)
			return m, err
		})
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	more := len(d.Messages) > outboxPageSize
	if more {
		d.Messages = d.Messages[:outboxPageSize]
	}
	if order == "asc" {
		slices.Reverse(d.Messages)
	}
	base := url.Values{}
	if d.Channel != "" {
		base.Set("channel", d.Channel)
	}
	if d.Status != "" {
		base.Set("status", d.Status)
	}
	if n := len(d.Messages); n > 0 {
		if (after == 0 && more) || after > 0 {
			v := cloneValues(base)
			v.Set("before", strconv.FormatInt(d.Messages[n-1].ID, 10))
			d.Older = queryURL(v)
		}
		if before > 0 || (after > 0 && more) {
			v := cloneValues(base)
			v.Set("after", strconv.FormatInt(d.Messages[0].ID, 10))
			d.Newer = queryURL(v)
		}
	}
	h.render(w, r, http.StatusOK, "outbox", "Outbox", "outbox", d)
}
