package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/internal/admin"
)

// cancelSpawned is the second half of `tasks cancel ID...` (docs/workflows.md, "Cancelling a
// durable workflow"): for each task cancelled now or before, the tasks it spawned as a durable
// workflow that have not ended are cancelled too (queues.cancel_spawned_tasks: never locks the
// workflow's row, skips busy spawned rows), when the role may execute that function. It returns
// how many each task's call cancelled, and an error per task some of whose spawned tasks stayed
// busy.
func cancelSpawned(ctx context.Context, pool *pgxpool.Pool, outs []admin.TaskOutcome, actor string) (map[int64]int64, []error, error) {
	var may bool
	if err := pool.QueryRow(ctx, `select has_function_privilege('queues.cancel_spawned_tasks(bigint, text, text)', 'execute')`).Scan(&may); err != nil {
		return nil, nil, err
	}
	if !may {
		return nil, nil, nil
	}
	done := map[int64]int64{}
	var busy []error
	for _, o := range outs {
		if o.Outcome != admin.OutcomeDone && o.Outcome != admin.OutcomeUnchanged {
			continue
		}
		res, err := admin.CancelSpawned(ctx, pool, o.TaskID, actor, "")
		if err != nil {
			return done, busy, mapAdminError(err)
		}
		done[o.TaskID] = res.Cancelled
		if res.Skipped > 0 {
			busy = append(busy, fmt.Errorf("task %d: %d task(s) it spawned were busy (another transaction held them): run the command again", o.TaskID, res.Skipped))
		}
	}
	return done, busy, nil
}
