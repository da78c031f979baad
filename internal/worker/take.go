package worker

import (
	"context"
	"time"

	"github.com/taskorch/taskorch/internal/taskrow"
)

// Children run by the worker that released them (docs/workflows.md): a completion that releases
// a workflow's children may lease some of them to this worker in the same statement
// (queues.complete_tasks_and_take), which writes each such child once, from waiting to running,
// instead of making it pending for a claim to lease. The database decides which may be taken (no
// limit governs them, of this worker's types, due, of no paused queue, of a priority no lower
// than any unlimited pending task's); the worker decides how many: as many as the batch's tasks
// freed slots, while its buffer holds less than a slot's worth of tasks per slot. The children it
// takes join the claim-ahead buffer as a claim's tasks do, and start as slots free.

// completeTakeSQL completes tasks as completeTasksSQL does and leases up to $6 of the children
// they release to worker $4 (of types $5, under a lease of $7): those come back with status
// takenStatus.
const completeTakeSQL = `select task_id, status from queues.complete_tasks_and_take($1, $2, $3, $4, $5, $6, $7::interval)`

// takenStatus marks a child a completion leased to this worker.
const takenStatus = "taken"

// leasedTasksSQL reads the tasks of $2 leased to worker $1 (queues.leased_tasks), as a claim
// returns them.
const leasedTasksSQL = `select ` + taskrow.Columns + ` from queues.leased_tasks($1, $2)`

// takeRoom is how many released children a completion of n tasks may lease to this worker: none
// while the fetch loop is not running (stopping, or not started) or the worker is quiet; else
// what its room lacks, as a claim would ask (claimSize): its free slots and its claim-ahead
// target less what its buffer holds, and at most n, the slots the batch's tasks freed. With
// slow tasks the target is small, so children this worker cannot start soon are left pending
// for idle workers to claim.
func (w *Worker) takeRoom(n int) int {
	if !w.fetching.Load() || w.quiet.Load() {
		return 0
	}
	room := w.cfg.Concurrency - len(w.slots) + int(w.aheadTarget.Load()) - w.ready.len()
	return max(0, min(n, room))
}

// readTaken reads the children a completion sent at sent leased to this worker and adds them to
// the buffer, as a claim's tasks. A child it cannot read stays leased to this worker until its
// lease expires or the worker's shutdown gives it back.
func (w *Worker) readTaken(ctx context.Context, ids []int64, sent time.Time) {
	err := w.retryDB(ctx, "read the children a completion took", func(ctx context.Context) error {
		rows, err := w.pool.Query(ctx, leasedTasksSQL, w.cfg.ID, ids)
		if err != nil {
			return err
		}
		tasks, err := w.collectClaimed(ctx, rows)
		if err != nil {
			return err
		}
		w.ready.add(tasks, sent, 0)
		return nil
	})
	if err != nil {
		w.log.Error("could not read the children this worker's completion took; they run again when their lease expires",
			"tasks", ids, "error", err)
	}
}
