package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// watermarks are the highest ids in the tables a benchmark writes, taken before it starts, so
// that a benchmark run in the given database can delete exactly the rows it added.
type watermarks struct {
	task, outbox int64

	comms          bool // the comms process set is installed
	message        int64
	sendEmailTask  int64
	sendEmailTry   int64
	processConfig  []any // comms.process_config's send_email row, restored at the end
	processConfigQ string
}

// takeWatermarks records the ids to delete above, and refuses a database where tasks are
// waiting: the benchmark's workers would claim and run them.
func takeWatermarks(ctx context.Context, db *pgxpool.Pool) (*watermarks, error) {
	var waiting int64
	if err := db.QueryRow(ctx, `select (select count(*) from queues.task where status = 'pending')
		+ (select count(*) from queues.task where status = 'running')`).Scan(&waiting); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if waiting > 0 {
		return nil, fmt.Errorf("bench: %d task(s) are pending or running in this database and the benchmark's workers would run them: "+
			"give the benchmark a database nobody else uses, or a user who may create databases (CREATEDB)", waiting)
	}
	m := &watermarks{}
	if err := db.QueryRow(ctx, `select coalesce((select max(task_id) from queues.task), 0),
		coalesce((select max(outbox_message_id) from queues.outbox_message), 0),
		to_regclass('comms.send_email_task') is not null`).Scan(&m.task, &m.outbox, &m.comms); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if m.comms {
		var maxAttempts int
		var base, maxBackoff, check string
		if err := db.QueryRow(ctx, `select coalesce((select max(message_id) from comms.message), 0),
			coalesce((select max(send_email_task_id) from comms.send_email_task), 0),
			coalesce((select max(send_email_attempt_id) from comms.send_email_attempt), 0),
			c.max_attempts, c.backoff_base::text, c.backoff_max::text, c.check_interval::text
			from comms.process_config c where c.process = 'send_email'`).
			Scan(&m.message, &m.sendEmailTask, &m.sendEmailTry, &maxAttempts, &base, &maxBackoff, &check); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		m.processConfig = []any{maxAttempts, base, maxBackoff, check}
		m.processConfigQ = `update comms.process_config set max_attempts = $1, backoff_base = $2::interval,
			backoff_max = $3::interval, check_interval = $4::interval where process = 'send_email'`
	}
	return m, nil
}

// cleanUp deletes the rows added since the watermarks were taken, history first.
func (m *watermarks) cleanUp(ctx context.Context, db *pgxpool.Pool) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("bench: clean up: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	stmts := []struct {
		sql string
		arg int64
	}{
		{`delete from queues.task_event where task_id > $1`, m.task},
		{`delete from queues.task_lease where task_id > $1`, m.task},
		{`delete from queues.error where task_id > $1`, m.task},
		{`delete from queues.outbox_message where outbox_message_id > $1`, m.outbox},
	}
	if m.comms {
		stmts = append(stmts, []struct {
			sql string
			arg int64
		}{
			{`delete from comms.send_email_attempt_succeeded where send_email_attempt_id > $1`, m.sendEmailTry},
			{`delete from comms.send_email_attempt_failed where send_email_attempt_id > $1`, m.sendEmailTry},
			{`delete from comms.send_email_task_succeeded where send_email_task_id > $1`, m.sendEmailTask},
			{`delete from comms.send_email_task_failed where send_email_task_id > $1`, m.sendEmailTask},
			{`delete from comms.send_email_attempt where send_email_attempt_id > $1`, m.sendEmailTry},
			{`delete from comms.send_email_task where send_email_task_id > $1`, m.sendEmailTask},
			{`delete from comms.email_message where message_id > $1`, m.message},
			{`delete from comms.message where message_id > $1`, m.message},
		}...)
	}
	stmts = append(stmts, struct {
		sql string
		arg int64
	}{`delete from queues.task where task_id > $1`, m.task})
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s.sql, s.arg); err != nil {
			return fmt.Errorf("bench: clean up (%s): %w", s.sql, err)
		}
	}
	if m.comms {
		if _, err := tx.Exec(ctx, m.processConfigQ, m.processConfig...); err != nil {
			return fmt.Errorf("bench: restore comms.process_config: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("bench: clean up: %w", err)
	}
	return nil
}

// taskMark is the highest task id before a run (0 in a database of the benchmark's own).
func (e *Env) taskMark(ctx context.Context) (int64, error) {
	var id int64
	err := e.admin.QueryRow(ctx, `select coalesce(max(task_id), 0) from queues.task`).Scan(&id)
	return id, err
}
