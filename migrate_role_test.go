package taskorch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/pgcluster"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A schema owner without CREATEROLE migrates a database, every set, when worker_service_user
// exists (docs/deployment.md, "Roles"): the migrations create no role that exists already.
func TestMigrateWithoutCreateRoleWhenTheRolesExist(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewEmptyDBURL(t)
	admin, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	require.True(t, scalar[bool](t, admin, `select exists (select from pg_roles where rolname = 'worker_service_user')`),
		"the shared cluster's harness made the worker role")
	db := pgx.Identifier{scalar[string](t, admin, `select current_database()`)}.Sanitize()
	owner, name := newLoginRole(t, admin, "taskorch_owner", "grant create on database "+db+" to %s")
	require.False(t, scalar[bool](t, admin, `select rolcreaterole or rolsuper from pg_roles where rolname = $1`, name))

	applied, err := taskorch.Migrate(ctx, owner, &taskorch.MigrateOpts{Processes: taskorch.ProcessSets()})
	require.NoError(t, err)
	require.NotEmpty(t, applied)
	st, err := taskorch.MigrateStatus(ctx, owner, &taskorch.MigrateOpts{Processes: taskorch.ProcessSets()})
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, "applied", s.State, s.ID)
	}
	require.Equal(t, name, scalar[string](t, admin, `select nspowner::regrole::text from pg_namespace where nspname = 'queues'`))
	require.True(t, scalar[bool](t, admin,
		`select has_function_privilege('worker_service_user', 'queues.claim_tasks(text, integer, interval, text[])', 'execute')`),
		"the owner granted the worker role its functions")
}

// Without the worker role and without CREATEROLE, Migrate names the role and the privilege it
// lacks, and applies nothing; once an administrator made the role, the same owner migrates.
// Roles are cluster-wide, so this runs on a cluster of its own, where the role does not exist.
func TestMigrateNamesTheMissingPrivilege(t *testing.T) {
	t.Parallel()
	ctx := context.WithoutCancel(t.Context())
	dir := t.TempDir()
	for d := dir; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755)) //nolint:gosec // PostgreSQL may run as another user (pgcluster)
	}
	c, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: filepath.Join(dir, "pg"), Settings: pgcluster.TestSettings(), Ephemeral: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(ctx) })
	su, err := pgxpool.New(ctx, c.URL("postgres"))
	require.NoError(t, err)
	t.Cleanup(su.Close)
	mustExec(t, su, `create role app_owner login`)
	mustExec(t, su, `create database app owner app_owner`)
	require.False(t, scalar[bool](t, su, `select exists (select from pg_roles where rolname = 'worker_service_user')`))

	cfg, err := pgxpool.ParseConfig(c.URL("app"))
	require.NoError(t, err)
	cfg.ConnConfig.User = "app_owner"
	owner, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(owner.Close)

	_, err = taskorch.Migrate(ctx, owner, nil)
	require.Error(t, err)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%v", err)
	require.Equal(t, "42501", pgErr.Code)
	require.Contains(t, pgErr.Message, "worker_service_user")
	require.Contains(t, pgErr.Message, "app_owner")
	require.Contains(t, pgErr.Message, "lacks CREATEROLE")
	require.Contains(t, pgErr.Hint, "create role worker_service_user nologin")
	require.False(t, scalar[bool](t, owner, `select exists (select from pg_namespace where nspname = 'queues' and to_regclass('queues.task') is not null)`),
		"the failed migration left nothing")

	mustExec(t, su, `create role worker_service_user nologin`)
	_, err = taskorch.Migrate(ctx, owner, nil)
	require.NoError(t, err)
	require.NoError(t, taskorch.CheckMigrations(ctx, owner, nil))
}
