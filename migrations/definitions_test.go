package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/migrations"
)

// The files and a migrated database agree (docs/design.md, "How the SQL is laid out"): every
// function (by name, all its overloads) and every view of taskorch's schemas is defined by
// exactly one file; every file's objects exist; and each is what its file says: in a
// transaction on the migrated database, each file's objects are dropped and the file applied
// again, and their definitions (body, arguments, settings, security), privileges and comments
// must come back as they were.
func TestDefinitionFilesMatchTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sets, err := migrate.Shipped(migrations.Sets...)
	require.NoError(t, err)
	pool := dbtest.NewDB(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	files := map[string][]migrate.Definition{} // kind:object -> files
	for _, s := range sets {
		for _, d := range s.Definitions {
			k := string(d.Kind) + ":" + d.Object
			files[k] = append(files[k], d)
		}
	}
	rows, err := conn.Query(ctx, `
		select 'function:' || n.nspname || '.' || p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		where n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg\_%'
		union
		select 'view:' || n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
		where c.relkind in ('v', 'm') and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg\_%'`)
	require.NoError(t, err)
	live, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Greater(t, len(live), 150)
	for _, o := range live {
		require.Len(t, files[o], 1, "%s: want exactly one file defining it (functions/<schema>/<name>.sql or views/<schema>/<name>.sql of its set)", o)
	}
	for o, ds := range files {
		require.Contains(t, live, o, "%s (%s) defines what the migrated database lacks", o, ds[0].ID())
	}

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for _, s := range sets {
		for _, d := range s.Definitions {
			before := describe(t, tx, d)
			_, err := tx.Exec(ctx, "savepoint f")
			require.NoError(t, err)
			for _, drop := range dropsOf(t, tx, d) {
				_, err := tx.Exec(ctx, drop)
				require.NoError(t, err, "%s: %s", d.ID(), drop)
			}
			require.Empty(t, describe(t, tx, d), d.ID())
			_, err = tx.Exec(ctx, d.SQL)
			require.NoError(t, err, "%s applied alone", d.ID())
			require.Equal(t, before, describe(t, tx, d),
				"%s: the migrated database's %s %s is not what its file says (a grant, a comment or a setting given elsewhere belongs in the file)", d.ID(), d.Kind, d.Object)
			_, err = tx.Exec(ctx, "rollback to savepoint f")
			require.NoError(t, err)
		}
	}
}

// describe returns the definition, privileges and comments of what d defines, one line each.
func describe(t *testing.T, tx pgx.Tx, d migrate.Definition) []string {
	t.Helper()
	schema, name, _ := strings.Cut(d.Object, ".")
	sql := `select p.oid::regprocedure::text || E'\n' || pg_get_functiondef(p.oid)
		|| E'\nacl: ' || coalesce((select string_agg(a::text, ' ' order by a::text) from unnest(p.proacl) a), '-')
		|| E'\ncomment: ' || coalesce(obj_description(p.oid, 'pg_proc'), '-')
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		where n.nspname = $1 and p.proname = $2 order by 1`
	if d.Kind == migrate.KindView {
		sql = `select c.oid::regclass::text || E'\n' || pg_get_viewdef(c.oid)
			|| E'\nacl: ' || coalesce((select string_agg(a::text, ' ' order by a::text) from unnest(c.relacl) a), '-')
			|| E'\ncomment: ' || coalesce(obj_description(c.oid, 'pg_class'), '-')
			|| coalesce((select string_agg(format(E'\ncolumn %s %s: %s', a.attname, format_type(a.atttypid, a.atttypmod),
			                                         coalesce(col_description(c.oid, a.attnum), '-')), '' order by a.attnum)
			             from pg_attribute a where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '')
			from pg_class c join pg_namespace n on n.oid = c.relnamespace
			where n.nspname = $1 and c.relname = $2 and c.relkind = 'v'`
	}
	rows, err := tx.Query(t.Context(), sql, schema, name)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// dropsOf returns the statements that drop what d defines (every overload), with what depends
// on it.
func dropsOf(t *testing.T, tx pgx.Tx, d migrate.Definition) []string {
	t.Helper()
	if d.Kind == migrate.KindView {
		return []string{fmt.Sprintf("drop view %s cascade", d.Object)}
	}
	schema, name, _ := strings.Cut(d.Object, ".")
	rows, err := tx.Query(t.Context(), `select format('drop routine %s cascade', p.oid::regprocedure)
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = $1 and p.proname = $2`, schema, name)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}
