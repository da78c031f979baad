package taskorch_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A claim reads no task that is not due yet: with 40,000 tasks due in 30 days (durable
// workflows asleep, tasks scheduled for later) of a type the worker runs, a claim that finds
// fewer due tasks than it asks for reads a few pages of the claim index, not all of them, and
// takes every due task in claim order, across priorities: without limits, and with a limit on
// another type; and the transports' dispatcher reads its window so too.
func TestClaimReadsNoTaskDueLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, `insert into queues.task (task_type, payload, priority, scheduled_at, run_at)
		select 'later', '{}', (i % 3) - 1, now() + interval '30 days', now() + interval '30 days' from generate_series(1, 40000) i`)
	mustExec(t, pool, `vacuum analyze queues.task`)
	tablePages := scalar[int64](t, pool, `select pg_relation_size('queues.task') / current_setting('block_size')::int`)
	indexPages := scalar[int64](t, pool, `select pg_relation_size('queues.task_claim_idx') / current_setting('block_size')::int`)
	require.Greater(t, indexPages, int64(250), "the tasks due later fill the claim index")

	enqueueDue := func() []int64 {
		var ids []int64
		for _, priority := range []int{5, 0, 0, 0, -3} {
			ids = append(ids, scalar[int64](t, pool, `select queues.enqueue('plain', '{}', _priority => $1)`, priority))
		}
		return ids // in claim order: priority, then due time, then id
	}
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	candidates := func(limited string) string {
		return `select internal.unlimited_claimable('` + limited + `', '{plain,later}', '{}', 10)`
	}
	pagesRead := func(sql string) int64 {
		for range 6 { // a session's first calls also read the catalogs and plan each statement anew
			_, err := conn.Exec(ctx, `begin; `+sql+`; rollback`)
			require.NoError(t, err)
		}
		var raw []byte
		require.NoError(t, conn.QueryRow(ctx, `explain (analyze, buffers, format json) `+sql).Scan(&raw))
		var plan []struct {
			Plan struct {
				Hit  int64 `json:"Shared Hit Blocks"`
				Read int64 `json:"Shared Read Blocks"`
			}
		}
		require.NoError(t, json.Unmarshal(raw, &plan))
		return plan[0].Plan.Hit + plan[0].Plan.Read
	}

	for _, limited := range []bool{false, true} {
		if limited {
			require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "elsewhere", MaxRunning: 1}))
		}
		due := enqueueDue()
		set := "{}"
		if limited {
			set = "{elsewhere}"
		}
		pages := pagesRead(candidates(set))
		require.Less(t, pages, indexPages/4, "limits set: %v: the candidates read %d pages (the table %d, the claim index %d)",
			limited, pages, tablePages, indexPages)
		got := scalar[[]int64](t, pool, `select array_agg(task_id) from queues.claim_tasks('w', 10, interval '5 minutes', '{plain,later}')`)
		require.Equal(t, due, got, "limits set: %v: the claim takes the due tasks, in claim order", limited)
	}
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'later' and status <> 'pending'`))

	// The Redis and SQS transports' dispatcher reads its window the same way.
	due := enqueueDue()
	pages := pagesRead(`select internal.due_window('{elsewhere}', '{plain,later}', '{}', 100)`)
	require.Less(t, pages, indexPages/4, "the dispatcher's window read %d pages (the claim index %d)", pages, indexPages)
	require.Equal(t, due, scalar[[]int64](t, pool, `select internal.due_window('{elsewhere}', '{plain,later}', '{}', 100)`))
	require.ElementsMatch(t, due, scalar[[]int64](t, pool, `select array_agg(id) from queues.dispatch_tasks('redis', 100) as id`))
}
