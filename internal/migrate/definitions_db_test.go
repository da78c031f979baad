package migrate_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m, dbtest.Options{}) }

const (
	schemaSQL = "create schema app;\ncreate table app.t (x int);\n"
	viewSQL   = "create or replace view app.v as select app.f() as f, count(*) as n from app.t;\nrevoke all on app.v from public;\n"
)

func fn(name, result string) string {
	return "create or replace function app." + name + "() returns text language sql as $$ select '" + result + "'::text $$;\n" +
		"revoke all on function app." + name + "() from public;\n"
}

func load(t *testing.T, fsys fstest.MapFS) []migrate.Set {
	t.Helper()
	s, err := migrate.Load(fsys, migrate.SetSpec{Name: "s"})
	require.NoError(t, err)
	return []migrate.Set{s}
}

func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbtest.NewEmptyDBURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(t.Context())) })
	return conn
}

func scalar[T any](t *testing.T, conn *pgx.Conn, sql string) T {
	t.Helper()
	var v T
	require.NoError(t, conn.QueryRow(t.Context(), sql).Scan(&v), sql)
	return v
}

// A definition is applied when it is new or its text changed, and only then: a run with nothing
// to do writes nothing.
func TestDefinitionsAppliedWhenNewOrChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := connect(t)
	fsys := fstest.MapFS{"0001_a.sql": {Data: []byte(schemaSQL)}, "functions/app/f.sql": {Data: []byte(fn("f", "one"))},
		"views/app/v.sql": {Data: []byte(viewSQL)}}
	ids, err := migrate.Up(ctx, conn, load(t, fsys))
	require.NoError(t, err)
	require.Equal(t, []string{"s/0001_a", "s/functions/app/f.sql", "s/views/app/v.sql"}, ids)
	require.Equal(t, "one", scalar[string](t, conn, "select f from app.v"))

	rows := `select string_agg(path || ' ' || xmin::text, ',' order by path) from queues.schema_definition`
	before := scalar[string](t, conn, rows)
	ids, err = migrate.Up(ctx, conn, load(t, fsys))
	require.NoError(t, err)
	require.Empty(t, ids)
	require.Equal(t, before, scalar[string](t, conn, rows), "nothing written")

	fsys["functions/app/f.sql"] = &fstest.MapFile{Data: []byte(fn("f", "two"))}
	ids, err = migrate.Up(ctx, conn, load(t, fsys))
	require.NoError(t, err)
	require.Equal(t, []string{"s/functions/app/f.sql"}, ids)
	require.Equal(t, "two", scalar[string](t, conn, "select f from app.v"))
}

// After a migration of its set, every definition is applied again: a view the migration had to
// drop comes back, though no file changed (and is not reported as changed).
func TestDefinitionsAppliedAgainAfterAMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := connect(t)
	fsys := fstest.MapFS{"0001_a.sql": {Data: []byte(schemaSQL)}, "functions/app/f.sql": {Data: []byte(fn("f", "one"))},
		"views/app/v.sql": {Data: []byte(viewSQL)}}
	_, err := migrate.Up(ctx, conn, load(t, fsys))
	require.NoError(t, err)

	fsys["0002_b.sql"] = &fstest.MapFile{Data: []byte("drop view app.v;\nalter table app.t alter column x type bigint;\n")}
	sets := load(t, fsys)
	st, err := migrate.StatusOf(ctx, conn, sets)
	require.NoError(t, err)
	require.Equal(t, migrate.StatePending, st[1].State)
	ids, err := migrate.Up(ctx, conn, sets)
	require.NoError(t, err)
	require.Equal(t, []string{"s/0002_b"}, ids)
	require.Equal(t, int64(0), scalar[int64](t, conn, "select n from app.v"))
	st, err = migrate.StatusOf(ctx, conn, sets)
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, migrate.StateApplied, s.State, s.ID)
	}

	// Applied but older than a migration (a run stopped between them): stale, applied by the next.
	_, err = conn.Exec(ctx, `update queues.schema_definition set migrations = migrations - 1`)
	require.NoError(t, err)
	st, err = migrate.StatusOf(ctx, conn, sets)
	require.NoError(t, err)
	require.Equal(t, migrate.StateStale, st[2].State)
	ids, err = migrate.Up(ctx, conn, sets)
	require.NoError(t, err)
	require.Empty(t, ids, "applied again, not changed")
	require.Equal(t, 2, scalar[int](t, conn, "select count(*)::int from queues.schema_definition where migrations = 2"))
}

// A database that holds a newer version of a definition (a newer taskorch migrated it) keeps it:
// an older binary neither applies its own nor reports it as pending.
func TestNewerDefinitionLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := connect(t)
	sums := func(version, text string) *fstest.MapFile {
		s, err := migrate.Load(fstest.MapFS{"0001_a.sql": {}, "functions/app/f.sql": {Data: []byte(text)}}, migrate.SetSpec{Name: "x"})
		require.NoError(t, err)
		return &fstest.MapFile{Data: []byte("functions/app/f.sql " + version + " " + s.Definitions[0].Checksum + "\n")}
	}
	newer := fstest.MapFS{"0001_a.sql": {Data: []byte(schemaSQL)}, "functions/app/f.sql": {Data: []byte(fn("f", "three"))},
		"definitions.sum": sums("3", fn("f", "three"))}
	_, err := migrate.Up(ctx, conn, load(t, newer))
	require.NoError(t, err)

	older := fstest.MapFS{"0001_a.sql": {Data: []byte(schemaSQL)}, "functions/app/f.sql": {Data: []byte(fn("f", "two"))},
		"definitions.sum": sums("2", fn("f", "two"))}
	ids, err := migrate.Up(ctx, conn, load(t, older))
	require.NoError(t, err)
	require.Empty(t, ids)
	require.Equal(t, "three", scalar[string](t, conn, "select app.f()"))
	st, err := migrate.StatusOf(ctx, conn, load(t, older))
	require.NoError(t, err)
	require.Equal(t, migrate.StateUnknown, st[1].State)

	// And a newer binary upgrades an older version.
	newest := fstest.MapFS{"0001_a.sql": {Data: []byte(schemaSQL)}, "functions/app/f.sql": {Data: []byte(fn("f", "four"))},
		"definitions.sum": sums("4", fn("f", "four"))}
	ids, err = migrate.Up(ctx, conn, load(t, newest))
	require.NoError(t, err)
	require.Equal(t, []string{"s/functions/app/f.sql"}, ids)
	require.Equal(t, "four", scalar[string](t, conn, "select app.f()"))
}

// The definitions of a set are applied all or nothing: a function that does not compile once
// all exist (an SQL function reading a table that is not there) fails the run naming it, and
// the other changed definitions are not applied either.
func TestBrokenDefinitionAppliesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := connect(t)
	fsys := fstest.MapFS{"0001_a.sql": {Data: []byte(schemaSQL)}, "functions/app/f.sql": {Data: []byte(fn("f", "one"))},
		"functions/app/g.sql": {Data: []byte(fn("g", "one"))}}
	_, err := migrate.Up(ctx, conn, load(t, fsys))
	require.NoError(t, err)

	fsys["functions/app/f.sql"] = &fstest.MapFile{Data: []byte(fn("f", "two"))}
	fsys["functions/app/g.sql"] = &fstest.MapFile{Data: []byte(strings.Replace(fn("g", "x"), "select 'x'::text", "select y::text from app.nope", 1))}
	_, err = migrate.Up(ctx, conn, load(t, fsys))
	require.ErrorContains(t, err, "a function does not compile")
	require.ErrorContains(t, err, `app.nope`)
	require.Equal(t, "one", scalar[string](t, conn, "select app.f()"), "rolled back with the rest")
	require.Equal(t, "one", scalar[string](t, conn, "select app.g()"))

	// A file that cannot be applied is named: here a result type that create or replace cannot
	// change (a migration must drop the old function first).
	fsys["functions/app/g.sql"] = &fstest.MapFile{Data: []byte(strings.Replace(fn("g", "1"), "returns text", "returns integer", 1))}
	_, err = migrate.Up(ctx, conn, load(t, fsys))
	require.ErrorContains(t, err, "migrate s/functions/app/g.sql: ")
	require.ErrorContains(t, err, "cannot change return type")
	require.Equal(t, "one", scalar[string](t, conn, "select app.f()"))
}

// A definition file deleted (definitions.sum keeps its line at the next version, marked deleted,
// and a migration drops its function) is recorded as deleted at that version: an older binary,
// which still has the file, neither creates the function again nor reports it pending.
func TestDeletedDefinitionRecorded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := connect(t)
	older := fstest.MapFS{"0001_a.sql": {Data: []byte(schemaSQL)}, "functions/app/f.sql": {Data: []byte(fn("f", "one"))},
		"functions/app/g.sql": {Data: []byte(fn("g", "one"))}}
	_, err := migrate.Up(ctx, conn, load(t, older))
	require.NoError(t, err)

	newer := fstest.MapFS{"0001_a.sql": {Data: []byte(schemaSQL)}, "functions/app/f.sql": {Data: []byte(fn("f", "one"))},
		"0002_b.sql": {Data: []byte("drop function app.g();\n")}, "definitions.sum": {Data: []byte("functions/app/g.sql 2 deleted\n")}}
	ids, err := migrate.Up(ctx, conn, load(t, newer))
	require.NoError(t, err)
	require.Equal(t, []string{"s/0002_b"}, ids)
	require.Equal(t, "functions/app/f.sql 1,functions/app/g.sql 2 deleted", scalar[string](t, conn,
		"select string_agg(path || ' ' || version || case when checksum = 'deleted' then ' deleted' else '' end, ',' order by path) from queues.schema_definition"))
	st, err := migrate.StatusOf(ctx, conn, load(t, newer))
	require.NoError(t, err)
	for _, s := range st {
		require.NotContains(t, s.ID, "g.sql")
		require.Equal(t, migrate.StateApplied, s.State, s.ID)
	}
	ids, err = migrate.Up(ctx, conn, load(t, newer))
	require.NoError(t, err)
	require.Empty(t, ids, "recorded once")

	// The older binary: its g.sql is older than the deletion (and it does not know 0002).
	ids, err = migrate.Up(ctx, conn, load(t, older))
	require.NoError(t, err)
	require.Empty(t, ids)
	require.False(t, scalar[bool](t, conn, "select to_regproc('app.g') is not null"), "not created again")
	st, err = migrate.StatusOf(ctx, conn, load(t, older))
	require.NoError(t, err)
	require.Equal(t, "s/functions/app/g.sql", st[len(st)-1].ID)
	require.Equal(t, migrate.StateUnknown, st[len(st)-1].State)
}
