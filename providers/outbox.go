package providers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
)

// Querier runs one statement: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Outbox is the development provider of every channel: instead of sending, it records the
// request in the database with queues.record_outbox_message(task_id, channel, request), where
// the dashboard's /outbox page shows it. Requests are checked as the real providers check them,
// so a malformed one fails the same way in development.
type Outbox struct {
	db      Querier
	channel string
}

// NewOutbox returns the outbox provider of channel (taskorch.TypeEmail, TypeSMS or
// TypeFileDelete).
func NewOutbox(db Querier, channel string) (*Outbox, error) {
	if db == nil {
		return nil, fmt.Errorf("outbox: the %s channel's outbox needs a database", channel)
	}
	switch channel {
	case taskorch.TypeEmail, taskorch.TypeSMS, taskorch.TypeFileDelete:
	default:
		return nil, fmt.Errorf("outbox: unknown channel %q (want email, sms or file_delete)", channel)
	}
	return &Outbox{db: db, channel: channel}, nil
}

// outboxResult is what queues.record_outbox_message returns.
type outboxResult struct {
	Status          string `json:"status"`
	OutboxMessageID int64  `json:"outbox_message_id"`
	Error           string `json:"error"`
}

// Call records call.Request and returns {"provider":"outbox","outbox_message_id":N}. A
// recording the function reports as failed is a retriable error with its message.
func (p *Outbox) Call(ctx context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
	var err error
	switch p.channel {
	case taskorch.TypeEmail:
		_, err = parseEmail("outbox", call, "", false)
	case taskorch.TypeSMS:
		_, err = parseSMS("outbox", call, "", false)
	default:
		_, err = parseFileDelete("outbox", call)
	}
	if err != nil {
		return nil, err
	}
	var taskID *int64
	if call.Task != nil {
		taskID = &call.Task.ID
	}
	var raw []byte
	q := `select queues.record_outbox_message($1::bigint, $2::text, $3::jsonb)`
	if _, ok := p.db.(*pgxpool.Pool); ok {
		// Its own transaction: commit without waiting for the disk. A recording lost in a crash
		// belongs to a task whose completion was not durable either (the completion's commit
		// comes later in the log and flushes it), so the task runs again and records it again,
		// as a provider that went down before accepting the message. A caller's transaction
		// (a pgx.Tx) keeps its own durability.
		q = `select queues.record_outbox_message($1::bigint, $2::text, $3::jsonb)
		     from (select set_config('synchronous_commit', 'off', true)) as async_commit`
	}
	if err := p.db.QueryRow(ctx, q, taskID, p.channel, []byte(call.Request)).Scan(&raw); err != nil {
		return nil, newRedactor().transportError(ctx, "outbox", err)
	}
	var res outboxResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, newRedactor().unparseable("outbox", 0, err)
	}
	switch res.Status {
	case "sent":
		return json.Marshal(map[string]any{"provider": "outbox", "outbox_message_id": res.OutboxMessageID})
	case "failed":
		msg := res.Error
		if msg == "" {
			msg = "queues.record_outbox_message reported a failure without a message"
		}
		return nil, &Error{Provider: "outbox", Message: msg}
	}
	return nil, newRedactor().unparseable("outbox", 0, fmt.Errorf("unknown status %q", res.Status))
}
