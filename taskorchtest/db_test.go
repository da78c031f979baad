package taskorchtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/taskorchtest"
)

// databaseExists reports whether the server has database name.
func databaseExists(t *testing.T, admin *pgxpool.Pool, name string) bool {
	t.Helper()
	var n int
	require.NoError(t, admin.QueryRow(context.WithoutCancel(t.Context()), `select count(*) from pg_database where datname = $1`, name).Scan(&n))
	return n == 1
}

// NewDB gives each test a migrated database of its own, cloned from a template named after the
// migrations' fingerprint, and drops it when the test ends even with a connection still open.
func TestNewDB(t *testing.T) {
	t.Parallel()
	server := dbtest.AdminURL(t)
	admin, err := pgxpool.New(t.Context(), server)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	fp, err := taskorch.MigrationFingerprint(nil)
	require.NoError(t, err)

	names := make(chan string, 2)
	t.Run("group", func(t *testing.T) {
		for range 2 {
			t.Run("db", func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				pool := taskorchtest.NewDB(t, server, nil)
				var name string
				require.NoError(t, pool.QueryRow(ctx, `select current_database()`).Scan(&name))
				require.True(t, strings.HasPrefix(name, "taskorchtest_"), name)
				names <- name
				client, err := taskorch.NewClient(pool, nil)
				require.NoError(t, err)
				res, err := client.Enqueue(ctx, greet{Name: "Ada"}, nil)
				require.NoError(t, err, "the database is migrated")
				task, err := client.Get(ctx, res.TaskID)
				require.NoError(t, err)
				require.Equal(t, taskorch.StatusPending, task.Status)
				require.NoError(t, taskorch.CheckMigrations(ctx, pool, nil))

				// A connection the test leaves open does not keep the database from being dropped.
				conn, err := pgx.Connect(ctx, taskorchtest.NewDBURL(t, server, nil))
				require.NoError(t, err)
				_ = conn
			})
		}
	})
	close(names)
	var got []string
	for n := range names {
		got = append(got, n)
		require.False(t, databaseExists(t, admin, n), "database %s is dropped when its test ends", n)
	}
	require.Len(t, got, 2)
	require.NotEqual(t, got[0], got[1], "each test has its own database")
	require.True(t, databaseExists(t, admin, "taskorchtest_tpl_"+fp[:16]), "the template is kept for the next runs")
}

// DBOpts.Migrate migrates the template with the shipped processes it names as well.
func TestNewDBWithProcesses(t *testing.T) {
	t.Parallel()
	pool := taskorchtest.NewDB(t, dbtest.AdminURL(t), &taskorchtest.DBOpts{Migrate: &taskorch.MigrateOpts{Processes: []string{"comms"}}, MaxConns: 2})
	require.NoError(t, taskorch.CheckMigrations(t.Context(), pool, &taskorch.MigrateOpts{Processes: []string{"comms"}}))
	require.Equal(t, int32(2), pool.Config().MaxConns)
}

// A URL that is not a postgres:// URL, or a server that cannot be reached, fails the test with
// what is wrong, the password hidden.
func TestNewDBBadURL(t *testing.T) {
	t.Parallel()
	msg := fails(t, func(tb testing.TB) { taskorchtest.NewDB(tb, "mysql://u:secret@127.0.0.1/x", nil) })
	require.Contains(t, msg, "taskorchtest: the test server's URL must be a postgres:// URL")
	require.NotContains(t, msg, "secret")
	msg = fails(t, func(tb testing.TB) {
		taskorchtest.NewDBURL(tb, "postgres://u:secret@127.0.0.1:1/postgres?connect_timeout=5", nil)
	})
	require.Contains(t, msg, "taskorchtest: connect to the test server")
	msg = fails(t, func(tb testing.TB) {
		taskorchtest.NewDB(tb, dbtest.AdminURL(t), &taskorchtest.DBOpts{Migrate: &taskorch.MigrateOpts{Processes: []string{"nope"}}})
	})
	require.Contains(t, msg, `unknown process set "nope"`)
}

// Tx is rolled back when the test ends: what the test enqueued in it is never committed.
func TestTx(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	t.Run("enqueue", func(t *testing.T) {
		tx := taskorchtest.Tx(t, pool)
		_, err := client.EnqueueTx(t.Context(), tx, greet{Name: "Ada"}, nil)
		require.NoError(t, err)
		taskorchtest.RequireEnqueued[greet](t.Context(), t, tx, nil)
	})
	t.Run("committed by the test", func(t *testing.T) {
		tx := taskorchtest.Tx(t, pool)
		_, err := client.EnqueueTx(t.Context(), tx, refuse{}, nil)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(t.Context())) // the cleanup's rollback then does nothing
	})
	taskorchtest.RequireNotEnqueued[greet](t.Context(), t, pool)
	taskorchtest.RequireEnqueued[refuse](t.Context(), t, pool, nil)

	pool.Close()
	msg := fails(t, func(tb testing.TB) { taskorchtest.Tx(tb, pool) })
	require.Contains(t, msg, "taskorchtest: begin the test's transaction")
}
