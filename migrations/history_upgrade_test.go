package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// partitionedFrom is the first core migration with the partitioned history (core/0031).
const partitionedFrom = 31

// migratedBefore returns a connection to a new database migrated up to the core migration
// before version (as a database of that time: the migrations only), and the core set.
func migratedBefore(t *testing.T, version int) (*pgx.Conn, []migrate.Set) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbtest.NewEmptyDBURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	sets, err := migrate.Shipped("core")
	require.NoError(t, err)
	ms := sets[0].Migrations
	cut := 0
	for cut < len(ms) && ms[cut].Version < version {
		cut++
	}
	require.Less(t, cut, len(ms), "core/%04d exists", version)
	require.Equal(t, version, ms[cut].Version)
	require.LessOrEqual(t, version, sets[0].History, "core/%04d is of the history, which defines its own functions", version)
	_, err = migrate.Up(ctx, conn, []migrate.Set{{SetSpec: sets[0].SetSpec, Migrations: ms[:cut]}})
	require.NoError(t, err)
	return conn, sets
}

func scalarOf[T any](t *testing.T, conn *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, conn.QueryRow(t.Context(), sql, args...).Scan(&v), sql)
	return v
}

func execOn(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	_, err := conn.Exec(t.Context(), sql, args...)
	require.NoError(t, err, sql)
}

// An upgrade of a database with history from before core/0031 keeps every lease and event with
// its id, puts each in its day's partition, continues the fencing tokens after every one issued,
// and keeps the history append-only.
func TestHistoryPartitionUpgradeKeepsHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, ms := migratedBefore(t, partitionedFrom)

	// History through the real path: three tasks claimed, two completed.
	for range 3 {
		execOn(t, conn, `select queues.enqueue('t', '{}')`)
	}
	execOn(t, conn, `select queues.complete_task(task_id, lease_id) from queues.claim_tasks('w', 3) limit 2`)
	// And spread over other days: yesterday, last week, a day boundary, and twenty years ago.
	for _, at := range []string{
		`now() - interval '1 day'`, `now() - interval '6 days'`,
		`date_trunc('day', now() at time zone 'UTC') at time zone 'UTC' - interval '1 microsecond'`,
		`timestamptz '2006-07-14 12:00+00'`,
	} {
		execOn(t, conn, `insert into queues.task_lease (task_id, worker_id, attempt, leased_at, expires_at)
			values (1, 'old', 1, `+at+`, `+at+` + interval '5 minutes')`)
		execOn(t, conn, `insert into queues.task_event (task_id, occurred_at, event, worker_id) values (1, `+at+`, 'claimed', 'old')`)
	}
	// Lease ids drawn by claims that rolled back: never issued again either.
	execOn(t, conn, `select nextval('queues.task_lease_task_lease_id_seq') from generate_series(1, 5)`)
	lastLease := scalarOf[int64](t, conn, `select last_value from queues.task_lease_task_lease_id_seq`)
	lastEvent := scalarOf[int64](t, conn, `select max(task_event_id) from queues.task_event`)

	const leasesSQL = `select json_agg(l order by task_lease_id)::jsonb from queues.task_lease l`
	// Compared on the columns the events had before the upgrade: a later migration adds
	// actor (core/0060), NULL for these rows.
	const eventsSQL = `select json_agg(to_jsonb(e) - 'actor' order by task_event_id)::jsonb from queues.task_event e`
	leases := scalarOf[string](t, conn, leasesSQL)
	events := scalarOf[string](t, conn, eventsSQL)
	require.Equal(t, 7, scalarOf[int](t, conn, `select count(*) from queues.task_lease`))
	require.Equal(t, 4, scalarOf[int](t, conn, `select count(*) from queues.task_event where worker_id = 'old'`))

	applied, err := migrate.Up(ctx, conn, ms)
	require.NoError(t, err)
	require.NotEmpty(t, applied)
	require.Equal(t, "core/0031_history_partitions", applied[0])

	require.Equal(t, "p", scalarOf[string](t, conn, `select relkind::text from pg_class where oid = 'queues.task_lease'::regclass`))
	require.Equal(t, "p", scalarOf[string](t, conn, `select relkind::text from pg_class where oid = 'queues.task_event'::regclass`))
	require.JSONEq(t, leases, scalarOf[string](t, conn, leasesSQL), "every lease, with its id and values")
	require.JSONEq(t, events, scalarOf[string](t, conn, eventsSQL), "every event, with its id and values")
	require.Zero(t, scalarOf[int](t, conn, `select count(*) from queues.task_lease
		where tableoid::regclass::text <> 'queues.task_lease_p' || to_char(leased_at at time zone 'UTC', 'YYYYMMDD')`),
		"each lease in its UTC day's partition")
	require.Zero(t, scalarOf[int](t, conn, `select count(*) from queues.task_event
		where tableoid::regclass::text <> 'queues.task_event_p' || to_char(occurred_at at time zone 'UTC', 'YYYYMMDD')`))
	require.Equal(t, 1, scalarOf[int](t, conn, `select count(*) from queues.task_lease_p20060714`))
	for _, name := range []string{"task_lease", "task_event"} {
		require.True(t, scalarOf[bool](t, conn, `select to_regclass('queues.' || $1 || '_p' ||
			to_char(now() at time zone 'UTC' + interval '2 days', 'YYYYMMDD')) is not null`, name), "%s: partitions ahead", name)
	}

	// A new claim's lease id comes after every one issued before.
	execOn(t, conn, `select queues.enqueue('t', '{}')`)
	lease := scalarOf[int64](t, conn, `select lease_id from queues.claim_tasks('w', 1)`)
	require.Greater(t, lease, lastLease)
	event := scalarOf[int64](t, conn, `insert into queues.task_event (task_id, event) values (1, 'snoozed') returning task_event_id`)
	require.Greater(t, event, lastEvent)
	require.Equal(t, "queues.task_lease_p"+scalarOf[string](t, conn, `select to_char(now() at time zone 'UTC', 'YYYYMMDD')`),
		scalarOf[string](t, conn, `select tableoid::regclass::text from queues.task_lease where task_lease_id = $1`, lease))

	// Still append-only, through the parent and through a partition.
	for _, table := range []string{"task_lease", "task_lease_p20060714", "task_event", "task_event_p20060714"} {
		_, err := conn.Exec(ctx, `update queues.`+table+` set attempt = 9`)
		require.ErrorContains(t, err, "append-only", table)
	}
}

// The upgrade is one transaction: when it cannot finish (here a view of the operator's on the
// old table blocks its drop), it fails naming the reason and leaves the history as it was.
func TestHistoryPartitionUpgradeAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, ms := migratedBefore(t, partitionedFrom)
	execOn(t, conn, `insert into queues.task_event (task_id, event) values (1, 'claimed'), (2, 'claimed')`)
	execOn(t, conn, `create view public.my_events as select task_id, event from queues.task_event`)

	_, err := migrate.Up(ctx, conn, ms)
	require.ErrorContains(t, err, "my_events")
	require.ErrorContains(t, err, "core/0031")
	require.Equal(t, "r", scalarOf[string](t, conn, `select relkind::text from pg_class where oid = 'queues.task_event'::regclass`))
	require.Equal(t, 2, scalarOf[int](t, conn, `select count(*) from public.my_events`))
	require.Equal(t, partitionedFrom-1, scalarOf[int](t, conn, `select max(version) from queues.schema_migration where migration_set = 'core'`))
	require.False(t, scalarOf[bool](t, conn, `select to_regclass('queues.task_event_old') is not null`))

	// Without the view, the upgrade goes through.
	execOn(t, conn, `drop view public.my_events`)
	_, err = migrate.Up(ctx, conn, ms)
	require.NoError(t, err)
	require.Equal(t, 2, scalarOf[int](t, conn, `select count(*) from queues.task_event`))
}
