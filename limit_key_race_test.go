package taskorch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Many claimers claiming and completing tasks of one per-key limit at once never have more than
// the limit per key running: not in any sample taken while they run, and not by the database's
// own records afterwards (no moment of claimed_at and completed_at with more of a key's tasks
// between the two than the limit); every task runs once, and every key starts before any key
// has drained (fairness across keys).
func TestLimitPerKeyConcurrentClaimsNeverOvershoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	const keys, perKey, maxRunning, claimers = 20, 15, 2, 8
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.race", MaxRunning: maxRunning, KeyField: "tenant"}))
	mustExec(t, pool, `select queues.enqueue('lim.race', jsonb_build_object('tenant', i % $1)) from generate_series(0, $2 - 1) i`,
		keys, keys*perKey)

	complete := func(cs []claimed) {
		for _, cl := range cs {
			mustExec(t, pool, `select queues.complete_task($1, $2)`, cl.TaskID, cl.LeaseID)
		}
	}
	var wg sync.WaitGroup
	var over atomic.Int64
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each claimer holds what it claimed while it claims again, so claims meet running
			// tasks of the keys they look at; then it completes the batch before.
			var held []claimed
			for {
				got := claim(t, pool, fmt.Sprint("w", i), 5, "5 minutes")
				complete(held)
				held = got
				if len(got) == 0 && scalar[int64](t, pool,
					`select count(*) from queues.task where task_type = 'lim.race' and status <> 'completed'`) == 0 {
					return
				}
				// What the database says at any moment: never more than the limit per key (counted,
				// and asserted once every claimer is done, so that none stops holding its tasks).
				over.Add(scalar[int64](t, pool, `select count(*) from (
					select limit_key from queues.task where task_type = 'lim.race' and status = 'running'
					group by limit_key having count(*) > $1) o`, maxRunning))
			}
		}()
	}
	wg.Wait()
	require.Zero(t, over.Load(), "no sample saw a key over the limit")

	require.Equal(t, int64(keys*perKey), scalar[int64](t, pool,
		`select count(*) from queues.task where task_type = 'lim.race' and status = 'completed' and attempt = 1`),
		"every task ran once")
	require.Equal(t, int64(keys*perKey), scalar[int64](t, pool,
		`select count(*) from queues.task_lease l join queues.task t using (task_id) where t.task_type = 'lim.race'`),
		"one lease each")
	// From the records: the most tasks of one key running at one moment. A lease is stamped
	// after the claim counted the key's running tasks, and a completion before it commits, so
	// intervals of tasks the limit kept apart do not overlap. At equal times, ends come first.
	most := scalar[int64](t, pool, `
		with ev as (
			select limit_key, claimed_at as at, 1 as d from queues.task where task_type = 'lim.race'
			union all
			select limit_key, completed_at, -1 from queues.task where task_type = 'lim.race'
		)
		select max(n) from (
			select sum(d) over (partition by limit_key order by at, d rows unbounded preceding) as n from ev) s`)
	require.LessOrEqual(t, most, int64(maxRunning), "never more than the limit per key, by claimed_at and completed_at")
	// Fairness kept: every key had a task claimed before any key's last task was claimed.
	require.True(t, scalar[bool](t, pool, `
		select max(first) < min(last) from (
			select limit_key, min(claimed_at) as first, max(claimed_at) as last
			from queues.task where task_type = 'lim.race' group by limit_key) k`),
		"every key started before any key drained")
}
