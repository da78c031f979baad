package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

var (
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	agoRE  = regexp.MustCompile(`(\d+(ms|s|m|h|d|y)( \d+(s|m|h|d))?|more than 100 years) ago`)
)

// golden compares a command's table output, with its timestamps masked, to
// testdata/golden/NAME.txt (rewritten by -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = agoRE.ReplaceAllString(timeRE.ReplaceAllString(got, "<time>"), "<ago>")
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got, "%s: go test ./cmd/taskorch -run TestGoldenTables -update", path)
}

// The human tables of every listing, against golden files.
func TestGoldenTables(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	cmd := func(args ...string) string {
		t.Helper()
		r := run(t, append(args, db...)...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.err)
		return r.out
	}

	cmd("enqueue", "report.build", `{"account_id": 7}`, "--priority", "3", "--key", "acct-7")
	cmd("enqueue", "mail.digest", `{}`, "--at", "2030-01-01T00:00:00Z", "--max-attempts", "2")
	cmd("enqueue", "taskorch.noop", `{"note": "<b>not html</b>"}`)
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	// Walk task 3 through a claim and a failure, so show has a lease, events and an error.
	_, err = conn.Exec(context.Background(), `select queues.claim_tasks('worker-a', 10, '1 minute', array['taskorch.noop'])`)
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), `select queues.fail_task(3, 'provider said no', lease_id, false) from queues.task where task_id = 3`)
	require.NoError(t, err)
	// A db_function task shows the function it runs (which must exist to be named).
	_, err = conn.Exec(context.Background(), `create schema comms;
		create function comms.send_email_supervisor(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$`)
	require.NoError(t, err)
	cmd("enqueue", "db_function", `{"db_function": "comms.send_email_supervisor", "send_email_task_id": 1}`, "--at", "2030-01-01T00:00:00Z")
	cmd("schedules", "add", "nightly", "0 3 * * *", "report.build", `{"all": true}`)
	// A schedule declared in code (WorkerConfig.Periodic), as a leader of term 1 declares it.
	_, err = conn.Exec(context.Background(), `insert into queues.leader (name, worker_id, term, elected_at, expires_at)
		values ('default', 'worker-a', 1, now(), now() + interval '1 hour')`)
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), `select * from queues.declare_schedules(1,
		'[{"name": "hourly-digest", "cron": "0 * * * *", "task_type": "mail.digest", "payload": {}}]')`)
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), `delete from queues.leader`)
	require.NoError(t, err)
	cmd("queues", "pause", "mail.digest", "--actor", "ann")
	// One SQL function's queue, paused alone.
	cmd("queues", "pause", "db_function:comms.send_email_supervisor", "--actor", "bob")

	golden(t, "tasks_list", cmd("tasks", "list"))
	golden(t, "tasks_list_failed", cmd("tasks", "list", "--status", "failed"))
	golden(t, "tasks_show", cmd("tasks", "show", "3"))
	golden(t, "schedules_list", cmd("schedules", "list"))
	golden(t, "queues_list", strings.ReplaceAll(cmd("queues", "list"), conn.Config().User, "<user>"))
	golden(t, "workers_list_empty", cmd("workers", "list"))
}

// The --json of the listings not covered elsewhere, parsed; and their bad input.
func TestJSONListings(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	pool := openPool(t, url)
	_, err := pool.Exec(context.Background(), `select queues.register_worker('w-json', 'host-a', 42, 8, 'v1', 'postgres')`)
	require.NoError(t, err)
	r := run(t, append([]string{"schedules", "add", "nightly", "0 3 * * *", "report.build", `{"all": true}`}, db...)...)
	require.Equal(t, 0, r.code, r.err)

	ws := runJSON[[]map[string]any](t, append([]string{"workers", "list"}, db...)...)
	require.Len(t, ws, 1)
	require.Equal(t, "w-json", ws[0]["worker_id"])
	require.Equal(t, "host-a", ws[0]["hostname"])
	require.EqualValues(t, 8, ws[0]["pool_size"])
	require.EqualValues(t, 0, ws[0]["running_tasks"])

	ss := runJSON[[]map[string]any](t, append([]string{"schedules", "list"}, db...)...)
	require.Len(t, ss, 1)
	require.Equal(t, "nightly", ss[0]["name"])
	require.Equal(t, "0 3 * * *", ss[0]["cron"])
	require.Equal(t, map[string]any{"all": true}, ss[0]["payload"])
	require.Equal(t, true, ss[0]["enabled"])

	v := runJSON[map[string]any](t, "version")
	require.NotEmpty(t, v["version"])
	require.Equal(t, runtime.Version(), v["go_version"])
	require.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, v["platform"])

	r = run(t, append([]string{"schedules", "add", "bad", "every tuesday", "report.build"}, db...)...)
	require.Equal(t, exitUsage, r.code)
	require.NotEmpty(t, r.err)
	r = run(t, append([]string{"schedules", "remove", "nosuch"}, db...)...)
	require.Equal(t, exitNotFound, r.code, r.err)
	r = run(t, append([]string{"schedules", "remove", "nightly"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Empty(t, runJSON[[]map[string]any](t, append([]string{"schedules", "list"}, db...)...))
}
