package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/batcher"
)

// Querier runs one statement: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Outbox is the development provider of every channel: instead of sending, it records the
// request in the database with queues.record_outbox_message(task_id, channel, request), where
// the dashboard's /outbox page shows it. Requests are checked as the real providers check them,
// so a malformed one fails the same way in development.
//
// Over a *pgxpool.Pool, the calls made while one recording runs are recorded together in the
// next (queues.record_outbox_messages): one statement and one commit for many messages, as a
// busy worker makes them (docs/providers.md).
type Outbox struct {
	db      Querier
	channel string
	batch   *batcher.Batcher[outboxRecord, []byte] // nil unless db is a pool
}

// outboxRecord is one recording: the task and its request.
type outboxRecord struct {
	taskID  *int64
	request []byte
}

// maxOutboxBatch bounds how many messages one statement records.
const maxOutboxBatch = 200

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
	p := &Outbox{db: db, channel: channel}
	if pool, ok := db.(*pgxpool.Pool); ok {
		p.batch = batcher.New(maxOutboxBatch, func(ctx context.Context, recs []outboxRecord) ([]batcher.Result[[]byte], error) {
			return p.recordBatch(ctx, pool, recs)
		})
	}
	return p, nil
}

// asyncCommit makes a recording on the pool commit without waiting for the disk. A recording
// lost in a crash belongs to a task whose completion was not durable either (the completion's
// commit comes later in the log and flushes it), so the task runs again and records it again,
// as a provider that went down before accepting the message. A caller's transaction (a pgx.Tx)
// keeps its own durability.
const asyncCommit = `(select set_config('synchronous_commit', 'off', true)) as async_commit`

// recordBatch records recs in one statement when there are several, else alone. When the server
// refuses the batch, each is recorded on its own, so only the one at fault fails.
func (p *Outbox) recordBatch(ctx context.Context, pool *pgxpool.Pool, recs []outboxRecord) ([]batcher.Result[[]byte], error) {
	if len(recs) > 1 {
		ids := make([]*int64, len(recs))
		channels := make([]string, len(recs))
		requests := make([][]byte, len(recs))
		for i, r := range recs {
			ids[i], channels[i], requests[i] = r.taskID, p.channel, r.request
		}
		rows, err := pool.Query(ctx, `select r.ord, r.result from `+asyncCommit+`,
			queues.record_outbox_messages($1::bigint[], $2::text[], $3::jsonb[]) as r`, ids, channels, requests)
		if err == nil {
			var batch []batcher.Result[[]byte]
			if batch, err = batcher.ReadOrdered(rows, len(recs)); err == nil {
				return batch, nil
			}
		}
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) {
			return nil, err
		}
	}
	results := make([]batcher.Result[[]byte], len(recs))
	for i, r := range recs {
		results[i].Err = pool.QueryRow(ctx, `select queues.record_outbox_message($1::bigint, $2::text, $3::jsonb) from `+asyncCommit,
			r.taskID, p.channel, r.request).Scan(&results[i].Value)
	}
	return results, nil
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
	if p.batch != nil {
		raw, err = p.batch.Do(ctx, outboxRecord{taskID: taskID, request: call.Request})
	} else {
		err = p.db.QueryRow(ctx, `select queues.record_outbox_message($1::bigint, $2::text, $3::jsonb)`,
			taskID, p.channel, []byte(call.Request)).Scan(&raw)
	}
	if err != nil {
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
