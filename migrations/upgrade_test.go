package migrations_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/schemadump"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/migrations"
)

// landed reads testdata/a4939dc.sum: the migrations of the last landed version, by set, with
// their checksums.
func landed(t *testing.T) map[string]map[string]string {
	t.Helper()
	f, err := os.Open("testdata/a4939dc.sum")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	out := map[string]map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		require.Len(t, fields, 3, line)
		if out[fields[0]] == nil {
			out[fields[0]] = map[string]string{}
		}
		out[fields[0]][fields[1]] = fields[2]
	}
	require.NoError(t, sc.Err())
	return out
}

// The migrations of the last landed version are kept byte for byte (databases recorded their
// checksums), and they are exactly each set's history: the migrations that may define functions.
func TestLandedMigrationsUnchanged(t *testing.T) {
	t.Parallel()
	sets, err := migrate.Shipped(migrations.Sets...)
	require.NoError(t, err)
	want := landed(t)
	require.Len(t, want, len(sets))
	for _, s := range sets {
		got := map[string]string{}
		for _, m := range s.Migrations {
			if m.Version <= s.History {
				got[m.ID()[len(s.Name)+1:]+".sql"] = m.Checksum
			}
		}
		require.Equal(t, want[s.Name], got, "%s: the history (up to %04d) is what a4939dc applied", s.Name, s.History)
		require.Greater(t, s.Migrations[len(s.Migrations)-1].Version, 0)
	}
}

// applyLanded builds a database as the last landed version's `taskorch migrate up` did: each set's
// history migrations, each in a transaction with its row in queues.schema_migration (that
// version's only bookkeeping).
func applyLanded(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	sets, err := migrate.Shipped(migrations.Sets...)
	require.NoError(t, err)
	for _, s := range sets {
		for _, m := range s.Migrations {
			if m.Version > s.History {
				continue
			}
			tx, err := conn.Begin(t.Context())
			require.NoError(t, err)
			_, err = tx.Exec(t.Context(), `create schema if not exists queues;
				create table if not exists queues.schema_migration (
				    migration_set text not null, version integer not null, name text not null, checksum text not null,
				    applied_at timestamptz not null default now(), primary key (migration_set, version))`)
			require.NoError(t, err)
			_, err = tx.Exec(t.Context(), m.SQL)
			require.NoError(t, err, m.ID())
			_, err = tx.Exec(t.Context(), `insert into queues.schema_migration (migration_set, version, name, checksum) values ($1, $2, $3, $4)`,
				m.Set, m.Version, m.Name, m.Checksum)
			require.NoError(t, err)
			require.NoError(t, tx.Commit(t.Context()))
		}
	}
}

// landedDB is a populated database of the last landed version, and what it held.
type landedDB struct {
	url     string
	conn    *pgx.Conn
	role    string              // the application's role
	tables  []string            // every table of taskorch's schemas
	columns map[string][]string // their columns
	rows    map[string]string   // their rows (rowsOf)
}

// newLandedDB builds a database as the last landed version did and fills it through that
// version's API (testdata/a4939dc_data.sql).
func newLandedDB(t *testing.T) *landedDB {
	t.Helper()
	ctx := t.Context()
	db := &landedDB{url: dbtest.NewEmptyDBURL(t), columns: map[string][]string{}, rows: map[string]string{}}
	conn, err := pgx.Connect(ctx, db.url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	db.conn = conn

	applyLanded(t, conn)
	require.False(t, scalarOf[bool](t, conn, `select to_regclass('queues.schema_definition') is not null`))
	db.role = "taskorch_upgrade_app_" + randomHex(t)
	execOn(t, conn, `create role `+db.role)
	t.Cleanup(func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `drop owned by `+db.role)
		_, _ = conn.Exec(context.WithoutCancel(ctx), `drop role if exists `+db.role)
	})
	data, err := os.ReadFile("testdata/a4939dc_data.sql")
	require.NoError(t, err)
	execOn(t, conn, strings.ReplaceAll(string(data), ":app", db.role))

	db.tables = scalarOf[[]string](t, conn, `select array_agg(c.oid::regclass::text order by 1) from pg_class c
		join pg_namespace n on n.oid = c.relnamespace
		where c.relkind in ('r', 'p') and not c.relispartition and n.nspname in ('queues', 'comms', 'files', 'accounts')
		  and c.oid not in ('queues.schema_migration'::regclass)`)
	require.Contains(t, db.tables, "queues.task_lease")
	for _, tbl := range db.tables {
		db.columns[tbl] = scalarOf[[]string](t, conn, `select array_agg(attname::text order by attnum) from pg_attribute
			where attrelid = $1::regclass and attnum > 0 and not attisdropped`, tbl)
		db.rows[tbl] = rowsOf(t, conn, tbl, db.columns[tbl])
	}
	require.Contains(t, db.rows["queues.task"], `"status": "dead"`)
	require.Contains(t, db.rows["comms.send_sms_task_restarted"], "the carrier is back")
	return db
}

// requireRowsKept checks that every row the database held is still there, with its values (the
// columns it had; new ones have defaults). The one change: with the accounts set, the registry
// reads file deletions from the view that names their account deletion.
func (db *landedDB) requireRowsKept(t *testing.T) {
	t.Helper()
	for _, tbl := range db.tables {
		want := db.rows[tbl]
		if tbl == "queues.process" {
			want = strings.Replace(want, `"instances_view": "file_deletion_instances"`, `"instances_view": "file_deletion_account_instances"`, 1)
		}
		require.JSONEq(t, want, rowsOf(t, db.conn, tbl, db.columns[tbl]), "%s: rows survive the upgrade", tbl)
	}
}

// requireFreshSchema drops the application role's grants (its own, not taskorch's) and checks
// that the database's schema is a fresh install's, byte for byte.
func (db *landedDB) requireFreshSchema(t *testing.T) {
	t.Helper()
	execOn(t, db.conn, `drop owned by `+db.role)
	got, err := schemadump.Dump(t.Context(), db.url)
	require.NoError(t, err)
	want, err := schemadump.Dump(t.Context(), dbtest.NewDBURL(t))
	require.NoError(t, err)
	if string(got) != string(want) {
		t.Fatalf("the upgraded schema differs from a fresh install's\n%s", firstDifference(string(want), string(got)))
	}
}

// A database of the last landed version, populated through its API (testdata/a4939dc_data.sql:
// tasks in every state with their leases, events and errors, workers and a leader, schedules,
// limits, a paused type, a signal, processes with their facts, an application role granted the
// enqueue functions), upgrades to this version: its schema is then the fresh install's, byte for
// byte (pg_dump), every row it held is still there, and it works: a task claimed before completes
// under its lease, a new claim's lease comes after every old one, the processes run, the
// application can still enqueue, and a worker's readiness check passes.
func TestUpgradeFromLastLandedVersion(t *testing.T) {
	t.Parallel()
	if _, err := schemadump.PgDump(); err != nil {
		t.Skipf("cannot compare the upgraded schema with a fresh install's without pg_dump: %v", err)
	}
	ctx := t.Context()
	db := newLandedDB(t)
	conn, role := db.conn, db.role
	lastLease := scalarOf[int64](t, conn, `select max(task_lease_id) from queues.task_lease`)
	running := scalarOf[int64](t, conn, `select lease_id from queues.task where task_id = 9 and status = 'running'`)
	// A dashboard's role granted the process counts (docs/security.md) before they answered
	// timed_out (core/0104 redefines them).
	execOn(t, conn, `grant execute on function queues.process_instance_counts(integer, text[]) to `+role)

	sets, err := migrate.Shipped(migrations.Sets...)
	require.NoError(t, err)
	applied, err := migrate.Up(ctx, conn, sets)
	require.NoError(t, err)
	require.Equal(t, "core/0035_trust_boundary", applied[0])
	require.Contains(t, applied, "core/functions/queues/claim_tasks.sql")
	again, err := migrate.Up(ctx, conn, sets)
	require.NoError(t, err)
	require.Empty(t, again)
	db.requireRowsKept(t)
	// The keys of the tasks in flight are scoped by their function (core/0090), so the pending
	// supervisor ticks are still found by their wake-ups; no task before it has an enqueuer.
	require.NotZero(t, scalarOf[int](t, conn, `select count(*) from queues.task
		where task_type = 'db_function' and (debounce_key is not null or idempotency_key is not null)`), "keyed db_function tasks in flight")
	require.Zero(t, scalarOf[int](t, conn, `select count(*) from queues.task
		where (debounce_key is not null or idempotency_key is not null)
		  and key_scope <> case when task_type = 'db_function' then payload ->> 'db_function' else '' end`))
	require.Zero(t, scalarOf[int](t, conn, `select count(*) from queues.task where enqueued_by is not null`))
	pendingTicks := `select count(*) from queues.task where debounce_key = 'tick:comms.send_email_supervisor' and status = 'pending'`
	require.Equal(t, 1, scalarOf[int](t, conn, pendingTicks), "the e-mail supervisor's tick from before")
	execOn(t, conn, `select queues.wake_supervisor('comms.send_email_supervisor', now() + interval '1 hour')`)
	require.Equal(t, 1, scalarOf[int](t, conn, pendingTicks), "a wake-up finds the tick pending from before")

	// The application kept its rights: it enqueues (the invoker functions, a permit) and adds
	// schedules.
	for _, fn := range []string{"queues.enqueue(text, jsonb, timestamptz, integer, text, integer, bigint[], text)",
		"queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer, bigint[], text)", "queues.insert_task(text, jsonb, timestamptz, integer, text, integer, bigint[], text)",
		"queues.enqueue_many(text[], jsonb[], timestamptz[], integer[], text[], integer[], bigint[], text)",
		"queues.insert_tasks(text[], jsonb[], timestamptz[], integer[], text[], integer[], bigint[], text)",
		"queues.permit_task_functions(text[], jsonb[])", "queues.add_schedule(text, text, text, jsonb, integer, integer, boolean, timestamptz)",
		"queues.get_task_status(bigint)", "queues.get_task_statuses(bigint[])"} {
		require.True(t, scalarOf[bool](t, conn, `select has_function_privilege($1, $2, 'execute')`, role, fn), fn)
	}
	execOn(t, conn, `set role `+role)
	appTask := scalarOf[int64](t, conn, `select queues.enqueue('after_upgrade', '{"by": "app"}')`)
	execOn(t, conn, `reset role`)

	// Works: the running task completes under its lease; a new claim's lease is a new token.
	require.True(t, scalarOf[bool](t, conn, `select queues.complete_task(9, $1)`, running))
	lease := scalarOf[int64](t, conn, `select lease_id from queues.claim_tasks('w-live', 1, interval '1 minute', array['after_upgrade']) where task_id = $1`, appTask)
	require.Greater(t, lease, lastLease)
	require.Equal(t, "succeeded", scalarOf[string](t, conn, `select comms.send_email_supervisor('{}') ->> 'status'`))
	require.Equal(t, 2, scalarOf[int](t, conn, `select count(*)::int from queues.process_instances(_process => 'files.file_deletion')
		where parent_process = 'accounts.account_deletion'`))
	require.Equal(t, 4, scalarOf[int](t, conn, `select count(*)::int from queues.process_instances(_process => 'files.file_deletion')`))
	// The instances views of before answer no timed_out instance; the counts still read them, and
	// the role granted them keeps its right.
	require.Equal(t, "0 0", scalarOf[string](t, conn, `select min(timed_out) || ' ' || max(timed_out) from queues.process_instance_counts()`))
	require.True(t, scalarOf[bool](t, conn, `select has_function_privilege($1, 'queues.process_instance_counts(integer, text[])', 'execute')`, role))
	pool, err := pgxpool.New(ctx, db.url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opts := &taskorch.MigrateOpts{Processes: taskorch.ProcessSets()}
	require.NoError(t, taskorch.CheckMigrations(ctx, pool, opts))
	st, err := taskorch.MigrateStatus(ctx, pool, opts)
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, "applied", s.State, s.ID)
	}
	db.requireFreshSchema(t)
}

// The same upgrade, by the script `taskorch migrate sql` prints, applied with psql as a DBA
// would (twice: the second run changes nothing): the same schema, every row kept, everything
// recorded as applied.
func TestUpgradeFromLastLandedVersionWithPsql(t *testing.T) {
	t.Parallel()
	if _, err := schemadump.PgDump(); err != nil {
		t.Skipf("cannot compare the upgraded schema with a fresh install's without pg_dump: %v", err)
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skipf("psql is not installed: %v", err) // .ci/run installs it
	}
	db := newLandedDB(t)
	sets, err := migrate.Shipped(migrations.Sets...)
	require.NoError(t, err)
	var script bytes.Buffer
	require.NoError(t, migrate.WriteSQL(&script, sets))
	for range 2 {
		cmd := exec.CommandContext(t.Context(), psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db.url)
		cmd.Stdin = bytes.NewReader(script.Bytes())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	db.requireRowsKept(t)
	st, err := migrate.StatusOf(t.Context(), db.conn, sets)
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, migrate.StateApplied, s.State, s.ID)
	}
	applied, err := migrate.Up(t.Context(), db.conn, sets)
	require.NoError(t, err)
	require.Empty(t, applied)
	db.requireFreshSchema(t)
}

// rowsOf returns the rows of table as a JSON array of objects of the given columns, in a
// stable order.
func rowsOf(t *testing.T, conn *pgx.Conn, table string, columns []string) string {
	t.Helper()
	return scalarOf[string](t, conn, `select coalesce(jsonb_agg(x order by x::text), '[]')::text from (
		select (select jsonb_object_agg(e.key, e.value) from jsonb_each(to_jsonb(t)) e where e.key = any ($1)) as x
		from `+table+` t) s`, columns)
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
