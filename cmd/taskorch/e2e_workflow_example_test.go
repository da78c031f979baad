package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The worked example of docs/workflows.md, "A worked example: an order", run as the document
// prints it: its setup and its SQL workflow are executed from the document's text, and its Go
// workflow is placeOrder below, which the test requires to be the document's block verbatim.

// docExample is the fenced block after the marker line "<!-- example: name -->" of
// docs/workflows.md.
func docExample(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSuffix(docBlock(t, "workflows.md", name), "\n")
}

// doc:order-go begin

// placeOrder enqueues an order's workflow in one transaction and returns the ship task's id.
func placeOrder(ctx context.Context, c *taskorch.Client, pool *pgxpool.Pool, order int64) (int64, error) {
	step := func(name string) taskorch.RawArgs {
		payload, _ := json.Marshal(map[string]any{"db_function": "shop.order_step", "order": order, "step": name})
		return taskorch.RawArgs{Type: taskorch.TypeDBFunction, Payload: payload}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing to undo after Commit
	charge, err := c.EnqueueTx(ctx, tx, step("charge"), nil)
	if err != nil {
		return 0, err
	}
	after := &taskorch.EnqueueOpts{After: []int64{charge.TaskID}}
	both, err := c.EnqueueManyTx(ctx, tx, []taskorch.EnqueueParams{
		{Args: step("reserve"), Opts: after},
		{Args: step("receipt"), Opts: after},
	})
	if err != nil {
		return 0, err
	}
	ship, err := c.EnqueueTx(ctx, tx, step("ship"), &taskorch.EnqueueOpts{
		After: []int64{both[0].TaskID, both[1].TaskID},
	})
	if err != nil {
		return 0, err
	}
	return ship.TaskID, tx.Commit(ctx)
}

// doc:order-go end

// The order example, in SQL (order 7) and in Go (order 8), run by two `taskorch worker`
// processes: every step of each order runs once (one lease, one row in shop.order_log), the
// charge before the reserve and the receipt, both before the ship; no task is left.
func TestE2EWorkflowOrderExample(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	src, err := os.ReadFile("e2e_workflow_example_test.go")
	require.NoError(t, err)
	_, goBlock, ok := strings.Cut(string(src), "// doc:order-go begin\n\n")
	require.True(t, ok)
	goBlock, _, ok = strings.Cut(goBlock, "\n\n// doc:order-go end")
	require.True(t, ok)
	require.Equal(t, docExample(t, "order-go"), goBlock, "placeOrder is the Go block of docs/workflows.md's order example, verbatim")

	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	_, err = pool.Exec(ctx, docExample(t, "order-setup"))
	require.NoError(t, err, "the example's setup applies")
	_, err = pool.Exec(ctx, docExample(t, "order-sql"))
	require.NoError(t, err, "the example's SQL workflow runs")
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	_, err = placeOrder(ctx, c, pool, 8)
	require.NoError(t, err)
	require.Equal(t, 8, q[int](t, pool, `select count(*)::int from queues.task`))
	require.Equal(t, 6, q[int](t, pool, `select count(*)::int from queues.task where status = 'waiting'`))

	startWorkerProc(t, url)
	startWorkerProc(t, url)
	waitFor(t, pool, "every step completed", `select count(*) filter (where status = 'completed') = 8 from queues.task`)

	for _, order := range []int64{7, 8} {
		var steps []string
		require.NoError(t, pool.QueryRow(ctx, `select array_agg(step order by n) from shop.order_log where order_id = $1`, order).Scan(&steps))
		require.Len(t, steps, 4, "order %d: each step once", order)
		require.Equal(t, "charge", steps[0], "order %d", order)
		require.ElementsMatch(t, []string{"reserve", "receipt"}, steps[1:3], "order %d", order)
		require.Equal(t, "ship", steps[3], "order %d", order)
	}
	require.Equal(t, 8, q[int](t, pool, `select count(*)::int from queues.task_lease`), "each task claimed once")
	require.Zero(t, q[int](t, pool, `select count(*)::int from queues.task_edge`))
	require.Zero(t, q[int](t, pool, `select count(*)::int from queues.task_wait_stripe`))
}
