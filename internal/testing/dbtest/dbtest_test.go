package dbtest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m, dbtest.Options{
		Migrate: func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `create table widgets (id int primary key, name text not null)`)
			return err
		},
		Fingerprint: "dbtest self-test schema v1",
	})
}

// dbName returns the name of the database pool is connected to.
func dbName(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) string {
	t.Helper()
	var name string
	require.NoError(t, q.QueryRow(t.Context(), "select current_database()").Scan(&name))
	return name
}

// dbExists reports whether database name exists on the test server.
func dbExists(t *testing.T, name string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbtest.AdminURL(t))
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var exists bool
	require.NoError(t, conn.QueryRow(t.Context(),
		"select exists (select from pg_database where datname = $1)", name).Scan(&exists))
	return exists
}

func countWidgets(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "select count(*) from widgets").Scan(&n))
	return n
}

func TestNewDBIsolatedAndMigrated(t *testing.T) {
	t.Parallel()
	db1, db2 := dbtest.NewDB(t), dbtest.NewDB(t)
	name1, name2 := dbName(t, db1), dbName(t, db2)
	require.NotEqual(t, name1, name2)
	require.True(t, strings.HasPrefix(name1, "taskorch_t_"), name1)

	_, err := db1.Exec(t.Context(), "insert into widgets values (1, 'one')")
	require.NoError(t, err)
	require.Equal(t, 1, countWidgets(t, db1))
	require.Equal(t, 0, countWidgets(t, db2), "databases must be isolated")
}

func TestNewDBDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		name = dbName(t, dbtest.NewDB(t))
		require.True(t, dbExists(t, name))
	})
	require.NotEmpty(t, name)
	require.False(t, dbExists(t, name), "database %s must be dropped after its test", name)
}

func TestNewDBURL(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	// Left open on purpose: dropping the database must terminate it.
	_, err = conn.Exec(t.Context(), "insert into widgets values (1, 'one')")
	require.NoError(t, err)
}

func TestNewDBWith(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 2})
	require.EqualValues(t, 2, pool.Config().MaxConns)
	require.Equal(t, 0, countWidgets(t, pool))
}

func TestTemplate(t *testing.T) {
	t.Parallel()
	conn, err := pgx.Connect(t.Context(), dbtest.AdminURL(t))
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	rows, err := conn.Query(t.Context(), `select datname from pg_database
		where datname like 'taskorch\_tpl\_%' and datistemplate and not datallowconn
		and shobj_description(oid, 'pg_database') like 'taskorch dbtest template%'`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, names, "a complete template must exist")
	for _, name := range names {
		require.Regexp(t, `^taskorch_tpl_[0-9a-f]{12}$`, name)
	}
}

func TestTxRollsBack(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("insert", func(t *testing.T) {
		tx := dbtest.Tx(t)
		name = dbName(t, tx)
		_, err := tx.Exec(t.Context(), "insert into widgets values (1, 'one')")
		require.NoError(t, err)
		var n int
		require.NoError(t, tx.QueryRow(t.Context(), "select count(*) from widgets").Scan(&n))
		require.Equal(t, 1, n)
	})
	tx := dbtest.Tx(t)
	require.Equal(t, name, dbName(t, tx), "Tx must use the package's shared database")
	var n int
	require.NoError(t, tx.QueryRow(t.Context(), "select count(*) from widgets where id = 1").Scan(&n))
	require.Equal(t, 0, n, "the insert must have been rolled back")
}

func TestParallelNewDB(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			pool := dbtest.NewDB(t)
			_, err := pool.Exec(t.Context(), "insert into widgets values ($1, 'w')", i)
			require.NoError(t, err)
			require.Equal(t, 1, countWidgets(t, pool))
			mu.Lock()
			defer mu.Unlock()
			name := dbName(t, pool)
			require.False(t, seen[name], "database %s handed out twice", name)
			seen[name] = true
		})
	}
}

func TestParallelTx(t *testing.T) {
	t.Parallel()
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			tx := dbtest.Tx(t)
			_, err := tx.Exec(t.Context(), "insert into widgets values ($1, 'w')", 100+i)
			require.NoError(t, err)
			var n int
			require.NoError(t, tx.QueryRow(t.Context(), "select count(*) from widgets where id >= 100").Scan(&n))
			require.Equal(t, 1, n, "transactions must not see each other's rows")
		})
	}
}
