package admin

import (
	"context"
	_ "embed" // queues.sql
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed queues.sql
var queuesSQL string

// Queue is a queue's backlog and state, as ListQueues returns it: a task type's, or one SQL
// function's db_function tasks', named db_function:<schema.function> (FunctionQueuePrefix), the
// name queues.pause_queue and queues.set_limit take. Pending tasks are split into Due (may run
// now) and Scheduled (later). Completed and cancelled tasks are not counted: counting them would
// read the whole history.
type Queue struct {
	// TaskType is the queue's name: a task type, or db_function:<schema.function>.
	TaskType         string     `json:"task_type"`
	State            string     `json:"state"` // "paused" (workers claim none of its tasks) or "running"
	Due              int64      `json:"due"`
	Scheduled        int64      `json:"scheduled"`
	Running          int64      `json:"running"`
	Failed           int64      `json:"failed"`
	Dead             int64      `json:"dead"`
	OldestDueSeconds float64    `json:"oldest_due_seconds"` // how long its oldest due task has waited
	PausedAt         *time.Time `json:"paused_at,omitempty"`
	PausedBy         *string    `json:"paused_by,omitempty"`
	// PausedQueue is the queue whose pause holds this one when it is not this one: db_function,
	// for a function's queue while the whole type is paused (resume that one to free it).
	PausedQueue *string `json:"paused_queue,omitempty"`
	// Workers is how many registered (live) workers claim the type: those whose task types
	// include it, and those that claim every type (WorkerConfig.ClaimUnknownTypes). A function's
	// queue counts the workers that claim db_function: each serves every function.
	Workers int64 `json:"workers"`
	// Unserved is true when the type has due tasks and no registered worker claims it: they wait
	// until a worker that can run them (its Go handler, its channel's provider) starts.
	Unserved bool `json:"unserved"`
}

// The states of a queue (Queue.State).
const (
	QueueRunning = "running"
	QueuePaused  = "paused"
)

// FunctionQueuePrefix starts the name of one SQL function's queue: db_function:<schema.function>.
const FunctionQueuePrefix = "db_function:"

// TypeMatch is the SQL condition that a task (the row t of queues.task) belongs to one of the
// queues in the text array placeholder: its task type, or its SQL function's queue
// (db_function:<schema.function>, FunctionQueuePrefix), so a filter by type takes the names
// queues list shows. The same rule as internal.matching_tasks's (the bulk actions').
func TypeMatch(placeholder string) string {
	return "(t.task_type = any (" + placeholder + ") or (t.task_type = 'db_function' and " +
		"'" + FunctionQueuePrefix + "' || (t.payload ->> 'db_function') = any (" + placeholder + ")))"
}

// QueueTaskType returns the task type of a queue's tasks: db_function for one SQL function's
// queue (db_function:<schema.function>), the queue's name otherwise.
func QueueTaskType(queue string) string {
	if strings.HasPrefix(queue, FunctionQueuePrefix) {
		return "db_function"
	}
	return queue
}

// ListQueues returns every queue with work in it (pending, running, failed or dead tasks),
// paused, among the 2,000 newest tasks, claimed by a registered worker or enqueued by a
// schedule, by name, with how many registered workers claim it. Each SQL function is a queue
// of its own (db_function:<schema.function>); db_function itself is listed only while it is
// paused (which holds every function) or when a task of it names no function. It reads the tasks
// that are not finished (through the status's partial indexes), queues.queue_pause,
// queues.worker and queues.schedule: an operator's role needs SELECT on them.
func ListQueues(ctx context.Context, db DB) ([]Queue, error) {
	rows, err := db.Query(ctx, queuesSQL)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Queue, error) {
		var q Queue
		err := r.Scan(&q.TaskType, &q.Due, &q.Scheduled, &q.Running, &q.Failed, &q.Dead, &q.OldestDueSeconds, &q.PausedAt, &q.PausedBy, &q.PausedQueue, &q.Workers)
		q.Unserved = q.Due > 0 && q.Workers == 0
		q.State = QueueRunning
		if q.PausedAt != nil {
			q.State = QueuePaused
		}
		return q, err
	})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return out, nil
}

// ServeHint says what runs tasks of taskType, for a warning about a type no worker claims: a
// worker with the channel's provider (its variable named) for email, sms and file_delete; a
// worker with a Go handler for it otherwise. A db_function task, of any function's queue, is
// claimed by every worker.
func ServeHint(taskType string) string {
	switch QueueTaskType(taskType) {
	case "email":
		return "a worker with an email provider (TASKORCH_EMAIL_PROVIDER)"
	case "sms":
		return "a worker with an sms provider (TASKORCH_SMS_PROVIDER)"
	case "file_delete":
		return "a worker with a file_delete signer (TASKORCH_FILES_SIGNER)"
	case "db_function":
		return "any taskorch worker"
	}
	return "a worker with a Go handler for " + taskType
}
