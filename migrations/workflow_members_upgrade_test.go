package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// An upgrade across core/0113 lists every task of the workflows enqueued before it in
// queues.workflow_task (their root, found by its own id, has no row), drops the workflow_id
// index, and the workflows still work: cancel_workflow finds every task, and deleting a task
// takes its row with it. The database of before is today's with core/0113 undone (its table
// dropped, the index back, the migration unrecorded): the numbered migrations alone past the
// history would install today's function files against tables they do not have yet.
func TestWorkflowMembersUpgrade(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbtest.NewDBURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	sets, err := migrate.Shipped("core")
	require.NoError(t, err)
	execOn(t, conn, `drop table queues.workflow_task`)
	execOn(t, conn, `create index task_workflow_idx on queues.task (workflow_id) where workflow_id is not null`)
	execOn(t, conn, `delete from queues.schema_migration where migration_set = 'core' and version = 113`)
	// Before: a diamond 1 → (2, 3) → 4 and a lone task 5, written as attach_parents wrote them.
	execOn(t, conn, `insert into queues.task (task_id, task_type, status, after_ids, workflow_id, on_parent_failure, waiting_stripes)
		values (1, 'wf', 'pending', null, null, null, null),
		       (2, 'wf', 'waiting', '{1}', 1, 'cancel', 1),
		       (3, 'wf', 'waiting', '{1}', 1, 'cancel', 1),
		       (4, 'wf', 'waiting', '{2,3}', 1, 'cancel', 1),
		       (5, 'wf', 'pending', null, null, null, null)`)
	execOn(t, conn, `insert into queues.task_edge (parent_id, child_id, stripe) values (1, 2, -1), (1, 3, -1), (2, 4, 0), (3, 4, 0)`)
	execOn(t, conn, `insert into queues.task_wait_stripe (child_id, stripe, pending) values (4, 0, 2)`)

	applied, err := migrate.Up(ctx, conn, sets)
	require.NoError(t, err)
	require.Contains(t, applied, "core/0113_workflow_members")
	require.Equal(t, "1:2 1:3 1:4", scalarOf[string](t, conn,
		`select string_agg(workflow_id || ':' || task_id, ' ' order by task_id) from queues.workflow_task`))
	require.False(t, scalarOf[bool](t, conn, `select to_regclass('queues.task_workflow_idx') is not null`))

	// A task deleted (ended first, as retention needs; its cancel cascades to 4) takes its row;
	// the others stay, and the workflow's cancel finds the two that had not ended.
	execOn(t, conn, `select queues.cancel_task(3)`)
	execOn(t, conn, `delete from queues.task where task_id = 3`)
	require.Equal(t, "1:2 1:4", scalarOf[string](t, conn,
		`select string_agg(workflow_id || ':' || task_id, ' ' order by task_id) from queues.workflow_task`))
	require.Equal(t, "2 2 0", scalarOf[string](t, conn,
		`select matched || ' ' || done || ' ' || skipped from queues.cancel_workflow(1, 'upgrade test')`))
	require.Equal(t, "cancelled cancelled cancelled pending", scalarOf[string](t, conn,
		`select string_agg(status::text, ' ' order by task_id) from queues.task`))
}
