package migrations_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// After a backlog drains in a large task table, a plain VACUUM (what autovacuum runs, with the
// table's settings) removes the drained tasks' entries from the front of the claim index, so the
// next claim reads one page, not one per 200 tasks drained. With index cleanup left to
// PostgreSQL, VACUUM skips the indexes here: the dead rows sit on under 2% of the table's pages.
func TestVacuumCleansTheClaimIndexAfterADrain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	var reloptions []string
	require.NoError(t, pool.QueryRow(ctx, `select reloptions from pg_class where oid = 'queues.task'::regclass`).Scan(&reloptions))
	require.Subset(t, reloptions, []string{"autovacuum_vacuum_scale_factor=0", "autovacuum_vacuum_threshold=50000", "vacuum_index_cleanup=on"})
	exec := func(sql string) {
		t.Helper()
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}

	// A week of finished tasks, then a backlog of 1,500 claimed and completed.
	exec(`insert into queues.task (task_type, payload, status, attempt, run_at, claimed_at, completed_at)
		select 'old', '{}', 'completed', 1, now() - interval '1 day', now() - interval '1 day', now() - interval '1 day'
		from generate_series(1, 300000)`)
	exec(`vacuum analyze queues.task`)
	exec(`select queues.enqueue_many(array_fill('noop'::text, array[1500]), array_fill('{}'::jsonb, array[1500]))`)
	exec(`with c as (select task_id, lease_id from queues.claim_tasks('w', 1500))
		select queues.complete_tasks_with_results(array_agg(task_id), array_agg(lease_id), null) from c`)
	before := claimPages(t, pool)
	require.Greater(t, before, 3, "the drained tasks' entries are read through before the vacuum")

	exec(`vacuum queues.task`)
	require.LessOrEqual(t, claimPages(t, pool), 2, "read %d pages before the vacuum", before)
}

// claimPages returns the shared buffers a claim's candidate query of an empty queue reads.
func claimPages(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var plan []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		}
	}
	var raw []byte
	require.NoError(t, pool.QueryRow(t.Context(), `explain (analyze, buffers, format json)
		select task_id from queues.task where status = 'pending' and run_at <= now()
		order by (limit_name is null) desc, priority desc, run_at, task_id limit 10 for update skip locked`).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &plan))
	return plan[0].Plan.Hit + plan[0].Plan.Read
}
