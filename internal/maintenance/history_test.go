package maintenance

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// dayName is the partition of table for the UTC day d is in.
func dayName(table string, d time.Time) string {
	return fmt.Sprintf("%s_p%s", table, d.UTC().Format("20060102"))
}

// dbNow is the database's clock.
func dbNow(t *testing.T, db DB) time.Time {
	t.Helper()
	return scalar[time.Time](t, db, `select now()`)
}

// partitionOf names the partition that holds the row of table with id.
func partitionOf(t *testing.T, db DB, table string, id int64) string {
	t.Helper()
	return scalar[string](t, db, fmt.Sprintf(`select tableoid::regclass::text from queues.%s where %s_id = $1`, table, table), id)
}

// A missing day partition does not make a claim fail: the lease lands in the default partition,
// and the leader's next maintain_history moves it (and an event dated years ahead) into its day,
// created then, leaving the default empty.
func TestMissingPartitionCaughtAndRepaired(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	term := lead(t, pool, "boss")
	today := dbNow(t, pool)
	for _, table := range []string{"task_lease", "task_event"} {
		mustExec(t, pool, fmt.Sprintf(`drop table if exists queues.%s`, dayName(table, today)))
	}

	task := scalar[int64](t, pool, `select queues.enqueue('t', '{}')`)
	lease := scalar[int64](t, pool, `select lease_id from queues.claim_tasks('w', 1)`)
	require.Equal(t, "queues.task_lease_default", partitionOf(t, pool, "task_lease", lease))
	ahead := today.AddDate(3, 0, 0)
	event := scalar[int64](t, pool, `insert into queues.task_event (task_id, occurred_at, event) values ($1, $2, 'snoozed')
		returning task_event_id`, task, ahead)
	require.Equal(t, "queues.task_event_default", partitionOf(t, pool, "task_event", event))

	res, ok, err := MaintainHistory(ctx, pool, term, KeepForever, 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.Subset(t, res.Created, []string{dayName("task_lease", today), dayName("task_event", today), dayName("task_event", ahead)})
	require.GreaterOrEqual(t, res.Moved, int64(2))
	require.Empty(t, res.Dropped)
	require.Equal(t, "queues."+dayName("task_lease", today), partitionOf(t, pool, "task_lease", lease))
	require.Equal(t, "queues."+dayName("task_event", ahead), partitionOf(t, pool, "task_event", event))
	for _, table := range []string{"task_lease_default", "task_event_default"} {
		require.Zero(t, scalar[int](t, pool, `select count(*) from queues.`+table), table)
	}
	require.Equal(t, task, scalar[int64](t, pool, `select task_id from queues.task_lease where task_lease_id = $1`, lease))

	// The task completes under the same lease, and the next claim's lease goes to today's
	// partition directly.
	require.True(t, scalar[bool](t, pool, `select queues.complete_task($1, $2)`, task, lease))
	mustExec(t, pool, `select queues.enqueue('t', '{}')`)
	next := scalar[int64](t, pool, `select lease_id from queues.claim_tasks('w', 1)`)
	require.Greater(t, next, lease)
	require.Equal(t, "queues."+dayName("task_lease", today), partitionOf(t, pool, "task_lease", next))

	// Nothing left to do: a second call creates and moves nothing.
	res, ok, err = MaintainHistory(ctx, pool, term, KeepForever, 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, HistoryResult{Created: []string{}, Dropped: []string{}}, res)
}

// maintain_history drops whole day partitions that ended more than keep ago, and keeps recent
// ones, the default partitions and tables that only look like its own; with a stale term it
// does nothing, with no keep it drops nothing, and bad input is refused.
func TestMaintainHistoryDropsOldDays(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	term := lead(t, pool, "boss")
	now := dbNow(t, pool)
	old, recent := now.AddDate(0, 0, -10), now.AddDate(0, 0, -3)
	for _, at := range []time.Time{old, recent} {
		mustExec(t, pool, `insert into queues.task_lease (task_id, attempt, leased_at, expires_at) values (1, 1, $1, $1)`, at)
		mustExec(t, pool, `insert into queues.task_event (task_id, occurred_at, event) values (1, $1, 'claimed')`, at)
	}
	// Caught by the default partitions, and moved into their days by the first call below.
	require.Equal(t, 2, scalar[int](t, pool, `select count(*) from queues.task_lease_default`))
	mustExec(t, pool, `insert into queues.task_lease (task_id, attempt, leased_at, expires_at) values (2, 1, now(), now())`)
	// Not ours: a table named like a day partition but not attached, and a partition named like
	// one whose bounds are two days.
	mustExec(t, pool, `create table queues.task_lease_p20200101 (like queues.task_lease)`)
	mustExec(t, pool, `create table queues.task_event_p20200101 partition of queues.task_event
		for values from ('2020-01-01 00:00+00') to ('2020-01-03 00:00+00')`)

	// A stale term does nothing.
	res, ok, err := MaintainHistory(ctx, pool, term+1, 24*time.Hour, 2)
	require.NoError(t, err)
	require.False(t, ok)
	require.Zero(t, res)
	require.Equal(t, 2, scalar[int](t, pool, `select count(*) from queues.task_lease_default`))

	// KeepForever (and a negative keep in SQL) drops nothing, but repairs the default.
	res, ok, err = MaintainHistory(ctx, pool, term, KeepForever, 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, res.Dropped)
	require.EqualValues(t, 4, res.Moved)
	require.Contains(t, res.Created, dayName("task_lease", old))
	require.JSONEq(t, `{"created": [], "moved": 0, "dropped": []}`,
		scalar[string](t, pool, `select queues.maintain_history($1, interval '-1 day')::text`, term))

	res, ok, err = MaintainHistory(ctx, pool, term, 5*24*time.Hour, 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.ElementsMatch(t, []string{dayName("task_lease", old), dayName("task_event", old)}, res.Dropped)
	require.Empty(t, res.Created)
	for _, name := range []string{
		dayName("task_lease", recent), dayName("task_event", recent), dayName("task_lease", now), dayName("task_event", now),
		"task_lease_default", "task_event_default", "task_lease_p20200101", "task_event_p20200101",
	} {
		require.True(t, scalar[bool](t, pool, `select to_regclass('queues.' || $1) is not null`, name), name)
	}
	for _, name := range []string{dayName("task_lease", old), dayName("task_event", old)} {
		require.False(t, scalar[bool](t, pool, `select to_regclass('queues.' || $1) is not null`, name), name)
	}
	require.Equal(t, 2, scalar[int](t, pool, `select count(*) from queues.task_lease`), "the rows of the days kept")
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task_event`))

	// Partitions ahead: today and _ahead_days after, created when missing.
	far := now.AddDate(0, 0, 5)
	res, _, err = MaintainHistory(ctx, pool, term, KeepForever, 5)
	require.NoError(t, err)
	require.Contains(t, res.Created, dayName("task_lease", far))
	require.Contains(t, res.Created, dayName("task_event", far))

	for _, bad := range []string{
		`select queues.maintain_history($1, null, -1)`,
		`select queues.maintain_history($1, null, 367)`,
		`select queues.maintain_history($1, null, null)`,
	} {
		_, err := pool.Exec(ctx, bad, term)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, bad)
		require.Equal(t, "22023", pgErr.Code, bad)
		require.Contains(t, pgErr.Message, "ahead_days must be between 0 and 366", bad)
	}
	for _, bad := range []string{
		`select internal.history_partition('task', current_date)`,
		`select internal.history_partition('task_lease', null)`,
	} {
		_, err := pool.Exec(ctx, bad)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, bad)
		require.Equal(t, "22023", pgErr.Code, bad)
	}
}

// History stays append-only when partitioned: an UPDATE of a parent or of a partition is refused.
func TestPartitionedHistoryRefusesUpdate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	term := lead(t, pool, "boss")
	_, _, err := MaintainHistory(ctx, pool, term, KeepForever, 0)
	require.NoError(t, err)
	mustExec(t, pool, `select queues.enqueue('t', '{}')`)
	mustExec(t, pool, `select lease_id from queues.claim_tasks('w', 1)`)
	mustExec(t, pool, `insert into queues.task_event (task_id, occurred_at, event) values (1, now() + interval '20 years', 'claimed')`)
	today := dbNow(t, pool)
	for _, table := range []string{"task_lease", dayName("task_lease", today), "task_lease_default", "task_event", "task_event_default"} {
		_, err := pool.Exec(ctx, `update queues.`+table+` set task_id = task_id`)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, table)
		require.Equal(t, "42501", pgErr.Code, table)
		require.Contains(t, pgErr.Message, "append-only", table)
	}
}

// The leader maintains the history in its retention pass, with HistoryRetention, and reports it
// with an EventHistory.
func TestMaintainerMaintainsHistory(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	old := dbNow(t, pool).AddDate(0, 0, -3)
	mustExec(t, pool, `insert into queues.task_lease (task_id, attempt, leased_at, expires_at) values (1, 1, $1, $1)`, old)

	ev := newEvents()
	cfg := testConfig("leader", ev)
	cfg.HistoryRetention = 24 * time.Hour
	start(t, pool, cfg)
	_, e := ev.wait(t, "history with a drop", func(_ string, e Event) bool { return e.Kind == EventHistory && len(e.History.Dropped) > 0 })
	require.NotZero(t, e.Term)
	require.Contains(t, e.History.Dropped, dayName("task_lease", old))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task_lease`))
	require.Zero(t, ev.count(func(_ string, e Event) bool { return e.Kind == EventError && e.Op == "history" }))
}
