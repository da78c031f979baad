package taskorch

import (
	"context"
	"fmt"

	"github.com/taskorch/taskorch/internal/admin"
)

// cancelSpawned cancels the tasks durable workflow task id spawned, after its cancel committed
// (Cancel), when the Client's role may execute queues.cancel_spawned_tasks; a role that may not
// cancels the workflow alone, as before the function existed.
func (c *Client) cancelSpawned(ctx context.Context, id int64) error {
	var may bool
	if err := c.pool.QueryRow(ctx, `select has_function_privilege('queues.cancel_spawned_tasks(bigint, text, text)', 'execute')`).Scan(&may); err != nil {
		return fmt.Errorf("cancel task %d: the tasks it spawned: %w", id, mapError(err))
	}
	if !may {
		return nil
	}
	res, err := admin.CancelSpawned(ctx, c.pool, id, "", "")
	if err != nil {
		return fmt.Errorf("cancel task %d: the tasks it spawned: %w", id, mapError(err))
	}
	if res.Skipped > 0 {
		return fmt.Errorf("cancel task %d: %d of the tasks it spawned were busy (another transaction held their rows): call Cancel again", id, res.Skipped)
	}
	return nil
}
