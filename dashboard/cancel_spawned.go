package dashboard

import (
	"context"
	"fmt"
	"strconv"

	"github.com/taskorch/taskorch/internal/admin"
)

// cancelSpawned cancels, after their cancel committed, the tasks that the cancelled tasks ids
// spawned as durable workflows, and those they spawned (queues.cancel_spawned_tasks, as
// Client.Cancel does; docs/workflows.md, "Cancelling a durable workflow"), when the dashboard's
// role may execute it; it returns what to add to the action's message.
func (h *Handler) cancelSpawned(ctx context.Context, ids []string, who identity) []string {
	var may bool
	if err := h.pool.QueryRow(ctx, `select has_function_privilege('queues.cancel_spawned_tasks(bigint, text, text)', 'execute')`).Scan(&may); err != nil || !may {
		return nil
	}
	var cancelled, busy int64
	for _, s := range ids {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			continue
		}
		res, err := admin.CancelSpawned(ctx, h.pool, id, who.actor(), "")
		if err != nil {
			h.cfg.Logger.Error("dashboard: cancelling the tasks a workflow spawned failed", "task_id", id, "error", err)
			return []string{fmt.Sprintf("The tasks task %d spawned were not cancelled: %s.", id, redactText(err.Error()))}
		}
		cancelled += res.Cancelled
		busy += res.Skipped
	}
	var msg []string
	if cancelled > 0 {
		msg = append(msg, fmt.Sprintf("Cancelled %d task(s) it spawned.", cancelled))
	}
	if busy > 0 {
		msg = append(msg, fmt.Sprintf("%d task(s) it spawned were busy: cancel again.", busy))
	}
	return msg
}
