package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m, dbtest.CoreOptions()) }

// result is what one run of the command printed and its exit code.
type result struct {
	out, err string
	code     int
}

// run runs the taskorch command in-process, as main does.
func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	err := cmd.ExecuteContext(t.Context())
	printError(&errb, err)
	return result{out: out.String(), err: errb.String(), code: exitCode(err)}
}

func runJSON[T any](t *testing.T, args ...string) T {
	t.Helper()
	r := run(t, append(args, "--json")...)
	require.Equal(t, 0, r.code, r.err)
	var v T
	require.NoError(t, json.Unmarshal([]byte(r.out), &v), r.out)
	return v
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDBURL(t)

	r := run(t, "migrate", "status", "--database-url", url)
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, "MIGRATION OR FILE")
	require.Regexp(t, `(?m)^core/0001_queues_schema +- +pending +-$`, r.out)
	require.Regexp(t, `(?m)^core/functions/queues/claim_tasks.sql +\d+ +pending +-$`, r.out)

	r = run(t, "migrate", "up", "--database-url", url)
	require.Equal(t, 0, r.code, r.err)
	sets, err := migrate.Shipped("core")
	require.NoError(t, err)
	want := ""
	for _, m := range sets[0].Migrations {
		want += "applied " + m.ID() + "\n"
	}
	for _, d := range sets[0].Definitions {
		want += "applied " + d.ID() + "\n"
	}
	require.Equal(t, want, r.out)

	up := runJSON[map[string][]string](t, "migrate", "up", "--database-url", url)
	require.Empty(t, up["applied"])
	r = run(t, "migrate", "up", "--database-url", url)
	require.Equal(t, "up to date\n", r.out)

	st := runJSON[[]map[string]any](t, "migrate", "status", "--database-url", url)
	require.Len(t, st, len(sets[0].Migrations)+len(sets[0].Definitions))
	for _, s := range st {
		require.Equal(t, "applied", s["state"], s["id"])
	}

	r = run(t, "migrate", "sql")
	require.Equal(t, 0, r.code, "migrate sql needs no database")
	require.Contains(t, r.out, "===== core/0001_queues_schema =====")
	require.Contains(t, r.out, "===== core/0002_queues_api =====")
	require.Contains(t, r.out, "----- core/functions/queues/claim_tasks.sql (version ")

	r = run(t, "migrate", "up", "--database-url", url, "--processes", "nosuch")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, `unknown process set "nosuch" (want some of [comms files accounts])`)
}

func TestEnqueueAndTasksCommands(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}

	r := run(t, append([]string{"enqueue", "report", `{"account_id": 7}`, "--priority", "5"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	id := strings.TrimSpace(r.out)

	res := runJSON[map[string]any](t, append([]string{"enqueue", "report", `{"account_id": 8}`, "--key", "r-8", "--at", "2030-01-02T15:04:05Z", "--max-attempts", "2"}, db...)...)
	require.Equal(t, false, res["duplicate"])
	again := runJSON[map[string]any](t, append([]string{"enqueue", "report", `{"account_id": 8}`, "--key", "r-8"}, db...)...)
	require.Equal(t, true, again["duplicate"])
	require.Equal(t, res["task_id"], again["task_id"])

	r = run(t, append([]string{"tasks", "list"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `^ID\s+TYPE\s+STATUS\s+ATTEMPT\s+PRIORITY\s+RUN AT\s+LAST ERROR$`, lines[0])
	require.Regexp(t, `^\d+\s+report\s+pending\s+0/2\s+0\s+2030-01-02T15:04:05Z\s+-$`, lines[1])
	require.Regexp(t, `^`+id+`\s+report\s+pending\s+0/25\s+5\s+`, lines[2])

	list := runJSON[struct {
		Tasks []map[string]any `json:"tasks"`
		Next  int64            `json:"next"`
	}](t, append([]string{"tasks", "list", "--limit", "1", "--status", "pending", "--type", "report"}, db...)...)
	require.Len(t, list.Tasks, 1)
	require.NotZero(t, list.Next)

	r = run(t, append([]string{"tasks", "show", id}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, "status           pending")
	require.Contains(t, r.out, `payload          {"account_id": 7}`)

	r = run(t, append([]string{"tasks", "cancel", id}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "task "+id+" is cancelled\n", r.out)
	shown := runJSON[map[string]map[string]any](t, append([]string{"tasks", "show", id}, db...)...)
	require.Equal(t, "cancelled", shown["task"]["status"])
	require.NotEmpty(t, shown["history"]["events"])

	r = run(t, append([]string{"tasks", "retry", id}, db...)...)
	require.Equal(t, "task "+id+" is pending\n", r.out)
}

// Bad input gets a clear message and a non-zero exit code; nothing is written.
func TestCommandErrors(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"enqueue", "report", `{"a":`}, exitUsage, "PAYLOAD is not valid JSON"},
		{[]string{"enqueue", "report", `[1]`}, exitUsage, "PAYLOAD must be a JSON object"},
		{[]string{"enqueue", "report", `{} {}`}, exitUsage, "more than one JSON value"},
		{[]string{"enqueue", "report", `{"s": "\u0000"}`}, exitUsage, "NUL character"},
		{[]string{"enqueue", "report", "{\"s\": \"\xff\"}"}, exitUsage, "not valid UTF-8"},
		{[]string{"enqueue", "bad type", `{}`}, exitUsage, "is malformed"},
		{[]string{"enqueue", "report", `{}`, "--at", "tomorrow"}, exitUsage, "--at \"tomorrow\" is not an RFC 3339 timestamp"},
		{[]string{"enqueue", "report", `{}`, "--max-attempts", "0"}, exitUsage, "--max-attempts must be at least 1"},
		{[]string{"enqueue", "report"}, exitUsage, "enqueue takes TYPE and PAYLOAD, or TYPE and --file FILE"},
		{[]string{"tasks", "show", "999999"}, exitNotFound, "task not found"},
		{[]string{"tasks", "retry", "999999"}, exitNotFound, "task 999999 does not exist"},
		{[]string{"tasks", "cancel", "abc"}, exitUsage, "task id must be a positive integer"},
		{[]string{"tasks", "list", "--status", "finished"}, exitUsage, `unknown status "finished"`},
		{[]string{"tasks", "list", "--bogus"}, exitUsage, "unknown flag: --bogus"},
	} {
		r := run(t, append(tc.args, db...)...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.err)
		require.Contains(t, r.err, tc.want, tc.args)
	}

	// A task in a status that forbids the operation: exit 4.
	id := strings.TrimSpace(run(t, append([]string{"enqueue", "report", `{}`}, db...)...).out)
	require.Equal(t, 0, run(t, append([]string{"tasks", "cancel", id}, db...)...).code)
	require.Equal(t, 0, run(t, append([]string{"tasks", "retry", id}, db...)...).code)
	list := runJSON[struct{ Tasks []any }](t, append([]string{"tasks", "list"}, db...)...)
	require.Len(t, list.Tasks, 1, "only the one good task was written")

	r := run(t, "tasks", "list", "--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.err, "cannot reach the database at nobody@127.0.0.1:1/none")

	r = run(t, "tasks", "list", "--database-url", "")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "no database: set DATABASE_URL")

	r = run(t, "tasks", "list", "--database-url", "not a url ::")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "not a valid PostgreSQL URL")
}

func TestStateErrorExitCode(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	id := strings.TrimSpace(run(t, append([]string{"enqueue", "report", `{}`}, db...)...).out)
	// Claim it from SQL so that it is running, then try to retry it.
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), `select queues.claim_tasks('w', 1)`)
	require.NoError(t, err)
	r := run(t, append([]string{"tasks", "retry", id}, db...)...)
	require.Equal(t, exitState, r.code)
	require.Contains(t, r.err, "is running")
}

// taskorch dev against a given database runs the demo and exits with --once.
func TestDevOnceWithDatabaseURL(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDBURL(t)
	r := run(t, "dev", "--once", "--database-url", url)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^Dashboard:\nhttp://127\.0\.0\.1:\d+/$`, r.out, "the dashboard URL on a line of its own")
	require.Regexp(t, `(?m)^PostgreSQL:\npostgres://\S+$`, r.out, "the PostgreSQL URL on a line of its own")
	require.Regexp(t, `(?m)^Sign in with this token .*\n[A-Za-z0-9_-]{20,}$`, r.out)
	for _, want := range []string{
		`(?m)^  send_email +\d+ +ann@example\.com +1 +0 +succeeded$`,
		`(?m)^  send_email +\d+ +flaky@example\.com +2 +1 +succeeded$`,
		`(?m)^  send_email +\d+ +bounce@example\.com +3 +3 +failed: email not sent after 3 failed attempts \(max 3\); last error: email provider: outbox: 550 no such user`,
		`(?m)^  send_sms +\d+ +\+15550000002 +2 +1 +succeeded$`,
		`(?m)^  file_deletion +\d+ +demo-uploads/reports/2026-q3\.pdf +1 +0 +succeeded$`,
		`(?m)^  account_deletion +\d+ +account \d+ +- +- +succeeded$`,
	} {
		require.Regexp(t, want, r.out)
	}

	// A second run finds the demo seeded and seeds nothing.
	r = run(t, "dev", "--once", "--database-url", url)
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.err, "demo: already seeded")
}
