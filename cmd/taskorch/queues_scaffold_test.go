package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
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
	require.Equal(t, "paused", list[0]["state"])

	// Every type with work, with its backlog per state; the paused one says by whom and since when.
	pool := openPool(t, url)
	enqueue(t, pool, "mail.send", `{"n": 1}`, 5)
	enqueue(t, pool, "mail.send", `{"n": 2}`, 5)
	enqueue(t, pool, "report.build", `{}`, 1)
	enqueue(t, pool, "img.resize", `{}`, 1)
	_, err := pool.Exec(t.Context(), `select * from queues.claim_tasks('w-1', 1, '1 minute', array['img.resize']);
		select queues.fail_task(task_id, 'bad image', lease_id, false) from queues.task where task_type = 'img.resize'`)
	require.NoError(t, err)
	r = run(t, append([]string{"queues", "list"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `^QUEUE +STATE +DUE +SCHEDULED +RUNNING +FAILED +DEAD +OLDEST DUE +WORKERS\n`+
		`img\.resize +running +0 +0 +0 +1 +0 +- +0\n`+
		`mail\.send +running +2 +0 +0 +0 +0 +\d+s ago +0 · unserved\n`+
		`report\.build +paused by \S+ since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +1 +0 +0 +0 +0 +\d+s ago +0 · unserved\n$`, r.out)
	require.Regexp(t, `^warning: no live worker claims mail\.send tasks: 2 due, the oldest waiting \d+s; they wait for a worker with a Go handler for mail\.send\n`+
		`warning: no live worker claims report\.build tasks: 1 due, `, r.err)
	type queue struct {
		TaskType string `json:"task_type"`
		State    string `json:"state"`
		Due      int64  `json:"due"`
		Failed   int64  `json:"failed"`
		PausedBy string `json:"paused_by"`
		PausedAt string `json:"paused_at"`
	}
	qs := runJSON[[]queue](t, append([]string{"queues", "list"}, db...)...)
	require.Len(t, qs, 3)
	require.Equal(t, queue{TaskType: "img.resize", State: "running", Failed: 1}, qs[0])
	require.Equal(t, queue{TaskType: "mail.send", State: "running", Due: 2}, qs[1])
	require.Equal(t, "paused", qs[2].State)
	require.NotEmpty(t, qs[2].PausedBy)
	require.NotEmpty(t, qs[2].PausedAt)

	res := runJSON[map[string]any](t, append([]string{"queues", "resume", "report.build"}, db...)...)
	require.Equal(t, map[string]any{"task_type": "report.build", "state": "running", "changed": true}, res)
	qs = runJSON[[]queue](t, append([]string{"queues", "list"}, db...)...)
	require.Equal(t, queue{TaskType: "report.build", State: "running", Due: 1}, qs[2])

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
	require.Contains(t, string(sql), "function crm.send_reminder_supervisor(_payload jsonb)")
	require.Contains(t, string(sql), "create table crm.send_reminder_due", "a channel process runs on the supervisor kit's ticks")
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

	// The wait step.
	r = run(t, "scaffold", "process", "confirm", "--channel", "email", "--wait-signal", "email.confirmed", "--out", "-")
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, "perform queues.wait_for_signal('email.confirmed', _key, _run);")
	require.Contains(t, r.out, "interval '24 hours'")
	r = run(t, "scaffold", "process", "confirm", "--wait-signal", "email.confirmed", "--out", "-")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "a wait step (signal \"email.confirmed\") needs a channel process")
	r = run(t, "scaffold", "process", "confirm", "--channel", "email", "--wait-signal", "email.confirmed", "--wait-timeout", "soon", "--out", "-")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, `wait timeout "soon" must be a number and a unit`)
	r = run(t, "scaffold", "process", "confirm", "--channel", "email", "--wait-signal", "bad signal!", "--out", "-")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, `signal "bad signal!" must be`)
}
