/*
Package taskorch is a PostgreSQL-first task orchestrator: every task, lease, attempt and outcome
lives in the database, and stateless workers claim tasks with FOR UPDATE SKIP LOCKED leases.

This package is the Go API. Applications whose logic lives in SQL use the same system through
the SQL API (queues.enqueue, queues.claim_tasks, ...; see docs/sql.md), and operators use the
taskorch command.

# Set up

Apply the migrations once (or at every start: it is idempotent and safe to run concurrently),
then make a client over a pgx pool:

	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	...
	if _, err := taskorch.Migrate(ctx, pool, nil); err != nil { ... }
	client, err := taskorch.NewClient(pool, nil)

# Enqueue

A task's payload is a Go value that marshals to a JSON object; its type names the handler that
will run it:

	type SendReport struct {
		AccountID int64 `json:"account_id"`
	}

	func (SendReport) TaskType() string { return "send_report" }

	res, err := client.Enqueue(ctx, SendReport{AccountID: 7}, &taskorch.EnqueueOpts{
		Priority:       5,                              // higher runs first
		ScheduledAt:    time.Now().Add(time.Hour),      // not before
		IdempotencyKey: "report-7-2026-11",             // at most one task per (type, key)
		MaxAttempts:    5,                              // then dead
	})

RawArgs enqueues a ready-made JSON object under any type name. EnqueueMany enqueues thousands
of tasks in one statement.

# Transactions

Every write has a ...Tx twin that runs in the caller's transaction, so a task exists exactly
when the application's own rows do:

	tx, err := pool.Begin(ctx)
	...
	_, err = tx.Exec(ctx, "insert into orders ...")
	_, err = client.EnqueueTx(ctx, tx, ChargeCard{OrderID: id}, nil)
	err = tx.Commit(ctx) // both, or neither

# Lifecycle

A task is pending until due, running while a worker holds its lease, then completed; a failed
attempt is retried after an exponential backoff with full jitter until MaxAttempts, then the task
is dead (retry it by hand with Client.Retry). A non-retriable failure makes it failed; Cancel
cancels it. Every claim is recorded in queues.task_lease (its id is the fencing token: a worker
whose lease expired and was taken over cannot record an outcome), every state change in
queues.task_event and every error in queues.error; Client.History returns them.

# Errors

Errors can be tested with errors.Is: ErrNotFound, ErrInvalidInput (with *InputError saying what
was wrong) and ErrWrongState.
*/
package taskorch
