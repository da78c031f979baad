package chaos

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The stranded-time report reads how each lease a killed worker held ended, from what the
// database recorded: here a worker ("k-1") holds five tasks at its "kill" — one it completes
// just after (in flight), one whose lease expires and is rescued, two the leader recovers because
// its session is gone, and one finished before the kill, which is not counted — and another
// worker ("k-2"), killed too, held nothing.
func TestStrandedTimes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(ctx, fixtureSQL)
	require.NoError(t, err)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`select queues.register_worker('boss', 'h')`)
	var term int64
	require.NoError(t, pool.QueryRow(ctx, `select queues.acquire_leadership('boss', interval '1 hour')`).Scan(&term))
	session, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	_, err = session.Exec(ctx, `select * from queues.register_worker_instance('k-1', 'p', 'h', 1, 4, null, null, null, true, interval '1 hour')`)
	require.NoError(t, err)
	exec(`select queues.enqueue('s', '{}') from generate_series(1, 5)`)
	rows, err := pool.Query(ctx, `select task_id, lease_id from queues.claim_tasks('k-1', 5) order by task_id`)
	require.NoError(t, err)
	type lease struct{ Task, Lease int64 }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[lease])
	require.NoError(t, err)
	require.Len(t, got, 5)
	exec(`select queues.complete_task($1, $2)`, got[4].Task, got[4].Lease) // before the kill

	var killed time.Time
	require.NoError(t, pool.QueryRow(ctx, `select clock_timestamp()`).Scan(&killed))
	pid := session.PgConn().PID()
	require.NoError(t, session.Close(ctx))
	require.Eventually(t, func() bool {
		var gone bool
		require.NoError(t, pool.QueryRow(ctx, `select not exists (select from pg_stat_activity where pid = $1)`, pid).Scan(&gone))
		return gone
	}, 15*time.Second, 5*time.Millisecond)
	exec(`select queues.complete_task($1, $2)`, got[0].Task, got[0].Lease)
	exec(`update queues.task set lease_expires_at = now() - interval '1 s' where task_id = $1`, got[1].Task)
	exec(`select queues.rescue_expired_leases()`)
	exec(`select * from queues.reap_lost_sessions(interval '0 s', $1)`, term)

	reports, err := strandedTimes(ctx, pool, []kill{{Worker: "k-1", At: killed}, {Worker: "k-2", At: killed, SameID: true}})
	require.NoError(t, err)
	require.Len(t, reports, 2)
	r := reports[0]
	require.Equal(t, 4, r.Held, "the lease completed before the kill is not counted")
	require.Equal(t, map[string]int{"finished": 1, "lease_expired": 1, "session": 2}, r.By)
	require.Equal(t, 3, r.Released)
	require.Positive(t, r.Stranded)
	require.Less(t, r.Stranded, time.Minute)
	require.Zero(t, reports[1].Held)

	var out bytes.Buffer
	printKills(&out, reports)
	require.Contains(t, out.String(), "session 2, lease_expired 1, finished 1")
	require.Contains(t, out.String(), "1 kills held tasks")
}
