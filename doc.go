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
		Priority:       new(5),                         // higher runs first; nil: the default
		ScheduledAt:    time.Now().Add(time.Hour),      // not before
		IdempotencyKey: "report-7-2026-11",             // at most one task per (type, key)
		MaxAttempts:    5,                              // then dead
	})

RawArgs enqueues a ready-made JSON object under any type name. EnqueueMany enqueues thousands
of tasks in one statement and says, for each, its id and whether it was a duplicate.

# Transactions

Every write and every read has a ...Tx twin that runs in the caller's transaction (EnqueueTx,
EnqueueManyTx, CancelTx, RetryTx, PauseQueueTx, ResumeQueueTx, AddScheduleTx, RemoveScheduleTx,
SetLimitTx, RemoveLimitTx, SignalTx; GetTx, ListTx, HistoryTx, PausedQueuesTx, SchedulesTx,
LimitsTx, LimitUsageTx, ParentResultsTx, WorkflowTx, WorkflowsTx), so a task exists exactly when the
application's own rows do, and a read sees the transaction's own uncommitted writes:

	tx, err := pool.Begin(ctx)
	...
	_, err = tx.Exec(ctx, "insert into orders ...")
	res, err := client.EnqueueTx(ctx, tx, ChargeCard{OrderID: id}, nil)
	task, err := client.GetTx(ctx, tx, res.TaskID) // pending, seen before the commit
	err = tx.Commit(ctx) // both, or neither

# Workers

A worker runs typed Go handlers (and the SQL world's db_function tasks). Options per type
override the worker's: a timeout, a cap on attempts, a retry delay of the handler's own:

	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, t *taskorch.TaskFor[SendReport]) error {
		return send(ctx, t.Args.AccountID)
	}, &taskorch.HandlerOpts{Timeout: time.Minute, MaxAttempts: 5})
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Handlers: hs})
	err = w.Run(ctx) // until ctx is done or w.Stop(ctx)

WorkerConfig.Middleware wraps every Go handler (logging, tracing, a tenant's context, a panic
policy); db_function and channel tasks, which have no Go handler, do not pass through it.
Worker.Stop stops a worker as SIGTERM stops `taskorch worker`, and Stopped says when it has;
Run does not own the pool: close it after Stopped.

# Schedules

AddSchedule enqueues a task at every tick of a cron expression, checked with the parser the
workers' leader uses; Schedules lists them and RemoveSchedule removes one:

	_, err = client.AddSchedule(ctx, &taskorch.ScheduleParams{
		Name: "nightly-report", Cron: "0 3 * * *", Args: SendReport{AccountID: 7},
	})

A program can declare its periodic tasks in code instead (WorkerConfig.Periodic): each new
leader makes the schedules declared in code exactly its list, leaving those added by hand alone.

# Testing

Package taskorchtest runs a worker for the length of a test (StartWorker), waits for a task's
outcome (WaitForOutcome) and checks what code enqueued, in the test's transaction
(RequireEnqueued).

# Lifecycle

A task is pending until due, running while a worker holds its lease, then completed; a failed
attempt is retried after an exponential backoff with full jitter until MaxAttempts, then the task
is dead (retry it by hand with Client.Retry). A non-retriable failure makes it failed; Cancel
cancels it. Every claim is recorded in queues.task_lease (its id is the fencing token: a worker
whose lease expired and was taken over cannot record an outcome), every other state change in
queues.task_event and every error in queues.error; the view queues.task_history merges them with
the completion, and Client.History returns them.

# Errors

Errors can be tested with errors.Is: ErrNotFound, ErrInvalidInput (with *InputError saying what
was wrong) and ErrWrongState.
*/
package taskorch
