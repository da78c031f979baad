package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/dbtest"
)

var (
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	agoRE  = regexp.MustCompile(`\d+(\.\d+)?(ms|s|m|h)+ ago`)
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
	cmd("schedules", "add", "nightly", "0 3 * * *", "report.build", `{"all": true}`)
	cmd("queues", "pause", "mail.digest")

	golden(t, "tasks_list", cmd("tasks", "list"))
	golden(t, "tasks_list_failed", cmd("tasks", "list", "--status", "failed"))
	golden(t, "tasks_show", cmd("tasks", "show", "3"))
	golden(t, "schedules_list", cmd("schedules", "list"))
	golden(t, "queues_list", strings.ReplaceAll(cmd("queues", "list"), conn.Config().User, "<user>"))
	golden(t, "workers_list_empty", cmd("workers", "list"))
}
