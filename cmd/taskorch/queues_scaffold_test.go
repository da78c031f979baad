package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/dbtest"
)

func TestQueuesCommands(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}

	r := run(t, append([]string{"queues", "pause", "report.build"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "report.build: paused\n", r.out)
	r = run(t, append([]string{"queues", "pause", "report.build"}, db...)...)
	require.Equal(t, "report.build: already paused\n", r.out)

	list := runJSON[[]map[string]any](t, append([]string{"queues", "list"}, db...)...)
	require.Len(t, list, 1)
	require.Equal(t, "report.build", list[0]["task_type"])
	r = run(t, append([]string{"queues", "list"}, db...)...)
	require.Regexp(t, `(?m)^TASK TYPE +PAUSED AT +PAUSED BY\nreport\.build +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +\S+\n$`, r.out)

	res := runJSON[map[string]any](t, append([]string{"queues", "resume", "report.build"}, db...)...)
	require.Equal(t, map[string]any{"task_type": "report.build", "state": "running", "changed": true}, res)
	require.Empty(t, runJSON[[]map[string]any](t, append([]string{"queues", "list"}, db...)...))

	r = run(t, append([]string{"queues", "pause", ""}, db...)...)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "_task_type is required")
	r = run(t, append([]string{"queues", "pause"}, db...)...)
	require.Equal(t, exitUsage, r.code)
}

// scaffold process writes a numbered migration file that applies to a migrated database.
func TestScaffoldProcessCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "0007_existing.sql"), []byte("select 1;"), 0o644))

	r := run(t, "scaffold", "process", "send_reminder", "--schema", "crm", "--key", "customer_id", "--channel", "email", "--out", dir)
	require.Equal(t, 0, r.code, r.err)
	path := strings.TrimSpace(r.out)
	require.Equal(t, filepath.Join(dir, "0008_send_reminder.sql"), path)
	sql, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(sql), "create function crm.send_reminder_supervisor(_payload jsonb)")
	require.Contains(t, string(sql), "TODO")

	conn, err := pgx.Connect(context.Background(), dbtest.NewDBURL(t))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), string(sql))
	require.NoError(t, err, "the written file applies")

	r = run(t, "scaffold", "process", "send_reminder", "--schema", "crm", "--out", dir)
	require.Equal(t, 0, r.code, "the next number: %s", r.err)
	require.Equal(t, filepath.Join(dir, "0009_send_reminder.sql"), strings.TrimSpace(r.out))

	r = run(t, "scaffold", "process", "purge", "--out", "-")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.out, "create function app.purge_supervisor(_payload jsonb)")

	r = run(t, "scaffold", "process", "Bad-Name", "--out", "-")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, `name "Bad-Name" must be 1 to 30 lower-case letters`)
	r = run(t, "scaffold", "process")
	require.Equal(t, exitUsage, r.code)
}
