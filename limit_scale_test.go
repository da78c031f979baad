package taskorch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A claim's search for unlimited tasks stops where the limited ones begin (the claim index puts
// unlimited tasks first): with 20,000 tasks of a limited type pending, the claim's search for
// unlimited ones reads a few pages, not the backlog, and the claim takes every unlimited task.
func TestClaimReadsPastNoLimitedBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.backlog", MaxRunning: 1, KeyField: "k"}))
	mustExec(t, pool, `insert into queues.task (task_type, payload)
		select 'lim.backlog', jsonb_build_object('k', i % 100) from generate_series(1, 20000) i`)
	var plain []int64
	for range 5 {
		plain = append(plain, scalar[int64](t, pool, `select queues.enqueue('plain', '{}')`))
	}
	// The limited inserts' first row versions (before their limit was set) are dead entries among
	// the unlimited ones until VACUUM, as autovacuum would remove them.
	mustExec(t, pool, `vacuum queues.task`)
	tablePages := scalar[int64](t, pool, `select pg_relation_size('queues.task') / current_setting('block_size')::int`)
	require.Greater(t, tablePages, int64(100), "the backlog fills the table")

	// The claim's unlimited candidates (internal.unlimited_claimable, what queues.claim_tasks
	// runs while limits exist): what they read, on a connection that has planned them already
	// (a first call also reads the catalogs).
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	const candidates = `select internal.unlimited_claimable('{lim.backlog}', '{plain,lim.backlog}', '{}', 10)`
	_, err = conn.Exec(ctx, `begin; `+candidates+`; rollback`)
	require.NoError(t, err)
	var raw []byte
	require.NoError(t, conn.QueryRow(ctx, `explain (analyze, buffers, format json) `+candidates).Scan(&raw))
	var plan []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		}
	}
	require.NoError(t, json.Unmarshal(raw, &plan))
	pages := plan[0].Plan.Hit + plan[0].Plan.Read
	require.Less(t, int64(pages), tablePages/10, "the candidates read %d pages of a %d-page table", pages, tablePages)

	got := scalar[[]int64](t, pool, `select array_agg(task_id order by task_id) from queues.claim_tasks('w', 10, interval '5 minutes', '{plain}')`)
	require.Equal(t, plain, got, "the claim takes every unlimited task")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'lim.backlog' and status <> 'pending'`))
}

// limitWakeArgs is the task of TestLimitHeldWorkerClaimsWhenItsTaskEnds.
type limitWakeArgs struct{}

func (limitWakeArgs) TaskType() string { return "lim.wake" }

// A worker whose claim came back short because a limit's running slots are taken claims again
// as soon as one of its own tasks ends, not after its poll interval: with a limit of one
// running task, a poll interval of 10 minutes and three tasks, all three complete, one at a
// time (the limit holds: never two running).
func TestLimitHeldWorkerClaimsWhenItsTaskEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: limitWakeArgs{}.TaskType(), MaxRunning: 1}))
	var ids []int64
	for range 3 {
		r, err := c.Enqueue(ctx, limitWakeArgs{}, nil)
		require.NoError(t, err)
		ids = append(ids, r.TaskID)
	}
	overlaps := make(chan int64, 3)
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(ctx context.Context, _ *taskorch.TaskFor[limitWakeArgs]) error {
		var running int64
		if err := pool.QueryRow(ctx, `select count(*) from queues.task where task_type = 'lim.wake' and status = 'running'`).Scan(&running); err != nil {
			return err
		}
		overlaps <- running
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 4,
		PollInterval: 10 * time.Minute, MaxPollInterval: 10 * time.Minute})
	for _, id := range ids {
		waitStatus(t, pool, id, taskorch.StatusCompleted) // 20 s each at most: far under the poll interval
	}
	for range ids {
		require.Equal(t, int64(1), <-overlaps, "one running at a time")
	}
}
