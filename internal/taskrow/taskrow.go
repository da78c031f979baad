// Package taskrow maps a row of queues.task to a tasktype.Task: the select list the client and
// the worker read, and where each column goes.
package taskrow

import "github.com/taskorch/taskorch/tasktype"

// Columns is the select list that Dest scans, in order.
const Columns = `task_id, task_type, payload, priority, idempotency_key, scheduled_at, enqueued_at,
	max_attempts, status::text, run_at, attempt, lease_id, lease_expires_at, worker_id, last_error,
	call_failure, claimed_at, completed_at, failed_at, dead_at, cancelled_at, after_ids, workflow_id`

// WithResultColumns is Columns and the result, which DestWithResult scans.
const WithResultColumns = Columns + `, result`

// Dest is the scan destinations of Columns in t.
func Dest(t *tasktype.Task) []any {
	return []any{&t.ID, &t.Type, (*[]byte)(&t.Payload), &t.Priority, &t.IdempotencyKey, &t.ScheduledAt, &t.EnqueuedAt,
		&t.MaxAttempts, &t.Status, &t.RunAt, &t.Attempt, &t.LeaseID, &t.LeaseExpiresAt, &t.WorkerID, &t.LastError,
		&t.CallFailure, &t.ClaimedAt, &t.CompletedAt, &t.FailedAt, &t.DeadAt, &t.CancelledAt, &t.ParentIDs, &t.WorkflowID}
}

// DestWithResult is the scan destinations of WithResultColumns in t.
func DestWithResult(t *tasktype.Task) []any {
	return append(Dest(t), (*[]byte)(&t.Result))
}
