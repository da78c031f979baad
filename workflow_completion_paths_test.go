package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Every way a task completes releases its children in that statement's transaction: the two
// functions that set a task completed (every other completion calls them) count the parent
// themselves, since the trigger that counts failures and cancellations leaves completions out.
// complete_task and complete_failed_call release; a waiting task cancelled with Client.Cancel
// cancels its own children.
func TestWorkflowEveryCompletionReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.ElementsMatch(t, []string{"complete_failed_call", "complete_tasks_with_results"},
		scalar[[]string](t, pool, `select array_agg(p.proname::text) from pg_proc p
			where p.pronamespace in ('queues'::regnamespace, 'internal'::regnamespace)
			  and p.prosrc ~* 'set\s+status\s*=\s*''completed'''`),
		"a function that completes tasks must count their children (internal.resolve_parents)")

	p1 := scalar[int64](t, pool, `select queues.enqueue('wf.done', '{}')`)
	p2 := scalar[int64](t, pool, `select queues.enqueue('wf.done', '{}')`)
	c1 := enqueueAfter(t, pool, "wf.kid", "cancel", p1)
	c2 := enqueueAfter(t, pool, "wf.kid", "cancel", p2)
	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, p1, claimOne(t, pool, "wf.done", p1)))
	require.Equal(t, "pending", statusOf(t, pool, c1))
	require.True(t, scalar[bool](t, pool, `select queues.complete_failed_call($1, $2, 'call_failed', 'gone')`, p2, claimOne(t, pool, "wf.done", p2)))
	require.Equal(t, "pending", statusOf(t, pool, c2))

	p := scalar[int64](t, pool, `select queues.enqueue('wf.done', '{}')`)
	w, err := c.Enqueue(ctx, raw("wf.kid", `{}`), &taskorch.EnqueueOpts{After: []int64{p}})
	require.NoError(t, err)
	g, err := c.Enqueue(ctx, raw("wf.kid", `{}`), &taskorch.EnqueueOpts{After: []int64{w.TaskID}})
	require.NoError(t, err)
	row, err := c.Cancel(ctx, w.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusCancelled, row.Status)
	require.Equal(t, "cancelled", statusOf(t, pool, g.TaskID))
	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, p, claimOne(t, pool, "wf.done", p)))
	require.Equal(t, "cancelled", statusOf(t, pool, w.TaskID))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_edge`))
}
