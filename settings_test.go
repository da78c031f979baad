package taskorch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// queues.settings holds the operator's tunables in one row; queues.retry_delay and
// queues.notify_coalesce_ms() read it, so an UPDATE tunes them and no migration undoes it.
func TestSettingsTuneRetryDelayAndNotify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)

	var base, maxDelay time.Duration
	var window int
	var created time.Time
	require.NoError(t, pool.QueryRow(ctx,
		`select retry_backoff_base, retry_backoff_max, notify_coalesce_ms, updated_at from queues.settings`).
		Scan(&base, &maxDelay, &window, &created))
	require.Equal(t, []any{time.Second, time.Hour, 0}, []any{base, maxDelay, window}, "the defaults")
	require.Equal(t, 0, scalar[int](t, pool, `select queues.notify_coalesce_ms()`))

	// retry_delay: uniform below min(max, base * 2^attempt).
	mustExec(t, pool, `update queues.settings set retry_backoff_base = interval '10 seconds', retry_backoff_max = interval '30 seconds'`)
	for _, tc := range []struct {
		attempt int
		ceiling float64
	}{{1, 20}, {5, 30}} {
		var lo, hi float64
		require.NoError(t, pool.QueryRow(ctx,
			`select min(s), max(s) from (select extract(epoch from queues.retry_delay($1))::float8 s from generate_series(1, 500)) x`,
			tc.attempt).Scan(&lo, &hi))
		require.GreaterOrEqual(t, lo, 0.0)
		require.Less(t, hi, tc.ceiling, "attempt %d", tc.attempt)
		require.Greater(t, hi, tc.ceiling/2, "attempt %d: the jitter spans the range", tc.attempt)
	}
	mustExec(t, pool, `update queues.settings set retry_backoff_max = interval '0'`)
	require.Equal(t, 0.0, scalar[float64](t, pool, `select extract(epoch from queues.retry_delay(7))::float8`))

	mustExec(t, pool, `update queues.settings set notify_coalesce_ms = 25`)
	require.Equal(t, 25, scalar[int](t, pool, `select queues.notify_coalesce_ms()`))
	require.True(t, scalar[bool](t, pool, `select updated_at > $1 and updated_by = session_user from queues.settings`, created),
		"an update is stamped")

	// One row, typed and checked, that stays.
	for sql, msg := range map[string]string{
		`update queues.settings set notify_coalesce_ms = -1`:                   "settings_notify_coalesce_ms_valid",
		`update queues.settings set retry_backoff_base = interval '-1 second'`: "settings_retry_backoff_base_valid",
		`insert into queues.settings (singleton) values (true)`:                "settings_pkey",
		`insert into queues.settings (singleton) values (false)`:               "settings_one_row",
		`delete from queues.settings`:                                          "one row, which is updated, never deleted",
		`truncate queues.settings`:                                             "one row, which is updated, never deleted",
	} {
		_, err := pool.Exec(ctx, sql)
		require.ErrorContains(t, err, msg, sql)
	}
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from queues.settings`))
}

// The lease step both claims share is internal: the worker role claims through claim_tasks and
// claim_tasks_by_id, and cannot call internal.lease_tasks, nor read or change the settings.
func TestLeaseStepAndSettingsNotForTheWorkerRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	ids := scalar[[]int64](t, pool, `select queues.enqueue_many(array['x', 'x'], array['{}', '{}']::jsonb[])`)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	mustExec(t, tx, `set local role worker_service_user`)
	require.Equal(t, 1, scalar[int](t, tx, `select count(*)::int from queues.claim_tasks('w', 1)`))
	require.Equal(t, 1, scalar[int](t, tx, `select count(*)::int from queues.claim_tasks_by_id('w', $1)`, ids))
	for _, sql := range []string{
		`select * from internal.lease_tasks('w', array[1::bigint], interval '1 minute')`,
		`select * from queues.settings`,
		`update queues.settings set notify_coalesce_ms = 1`,
	} {
		_, err := tx.Exec(ctx, "savepoint s")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sql)
		require.ErrorContains(t, err, "permission denied", sql)
		_, err = tx.Exec(ctx, "rollback to savepoint s")
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))

	// Each claim, whichever function made it, wrote one lease row matching the task's lease and
	// attempt, and no event.
	require.Equal(t, 2, scalar[int](t, pool, `select count(*)::int from queues.task t
		join queues.task_lease l on l.task_lease_id = t.lease_id and l.task_id = t.task_id
			and l.attempt = t.attempt and l.worker_id = 'w' and l.expires_at = t.lease_expires_at
		where t.status = 'running' and t.attempt = 1`))
}
