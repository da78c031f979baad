package taskorch_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Four processes starting together apply each migration once; a second run applies nothing.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewEmptyDBURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()

	st, err := taskorch.MigrateStatus(ctx, pool, nil)
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, "pending", s.State)
	}

	applied := make([][]string, 4)
	var g errgroup.Group
	for i := range applied {
		g.Go(func() error {
			p, err := pgxpool.New(ctx, url)
			if err != nil {
				return err
			}
			defer p.Close()
			applied[i], err = taskorch.Migrate(ctx, p, nil)
			return err
		})
	}
	require.NoError(t, g.Wait())
	var total []string
	for _, a := range applied {
		total = append(total, a...)
	}
	require.ElementsMatch(t, coreMigrationIDs(t), total, "every migration applied exactly once across the four callers")

	again, err := taskorch.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	require.Empty(t, again)
	st, err = taskorch.MigrateStatus(ctx, pool, nil)
	require.NoError(t, err)
	require.Len(t, st, len(coreMigrationIDs(t)))
	for _, s := range st {
		require.Equal(t, "applied", s.State)
		require.NotEmpty(t, s.AppliedAt)
	}

	// A migration edited after it was applied is reported and stops migrate up.
	_, err = pool.Exec(ctx, `update queues.schema_migration set checksum = 'x' where version = 2`)
	require.NoError(t, err)
	st, err = taskorch.MigrateStatus(ctx, pool, nil)
	require.NoError(t, err)
	require.Equal(t, "modified", st[1].State)
	_, err = taskorch.Migrate(ctx, pool, nil)
	require.ErrorContains(t, err, "changed after it was applied")

	_, err = taskorch.Migrate(ctx, pool, &taskorch.MigrateOpts{Processes: []string{"nosuchprocess"}})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
}

// The script `taskorch migrate sql` prints, applied with psql, gives the same database as
// Migrate, and is harmless to apply twice.
func TestMigrationSQLAppliesWithPsql(t *testing.T) {
	t.Parallel()
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("psql is not installed; .ci/run installs it") // reported by -v; CI always has psql
	}
	ctx := context.Background()
	var script bytes.Buffer
	require.NoError(t, taskorch.MigrationSQL(&script, nil))
	url := dbtest.NewEmptyDBURL(t)
	for range 2 {
		cmd := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url)
		cmd.Stdin = bytes.NewReader(script.Bytes())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	st, err := taskorch.MigrateStatus(ctx, pool, nil)
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, "applied", s.State, "%s/%d", s.Set, s.Version)
	}
	applied, err := taskorch.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	require.Empty(t, applied)

	// And the schema works.
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, raw("psql_applied", `{}`), nil)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(script.String(), "-- taskorch migrations"))
}

// coreMigrationIDs lists the shipped core migrations and function and view files, as Migrate
// reports them when it applies them to an empty database.
func coreMigrationIDs(t *testing.T) []string {
	t.Helper()
	sets, err := migrate.Shipped("core")
	require.NoError(t, err)
	var ids []string
	for _, m := range sets[0].Migrations {
		ids = append(ids, m.ID())
	}
	for _, d := range sets[0].Definitions {
		ids = append(ids, d.ID())
	}
	return ids
}
