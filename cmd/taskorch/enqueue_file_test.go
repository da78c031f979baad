package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// enqueue --file: one task per line, in one transaction; a bad line enqueues nothing.
func TestEnqueueFile(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	dir := t.TempDir()
	var b strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&b, "{\"n\": %d}\n", i)
		if i == 10 {
			b.WriteString("\n") // blank lines are skipped
		}
	}
	good := filepath.Join(dir, "good.jsonl")
	require.NoError(t, os.WriteFile(good, []byte(b.String()), 0o600))

	res := runJSON[map[string]int64](t, "enqueue", "report", "--file", good, "--priority", "3", "--database-url", url)
	require.EqualValues(t, 2500, res["enqueued"])
	require.Equal(t, res["last_task_id"]-res["first_task_id"]+1, res["enqueued"])
	require.Equal(t, 2500, q[int](t, pool, `select count(*)::int from queues.task where task_type = 'report' and priority = 3`))
	require.Equal(t, 2499, q[int](t, pool, `select max((payload->>'n')::int) from queues.task`))

	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{\"n\": 1}\n{\"n\": 2}\n[3]\n"), 0o600))
	r := run(t, "enqueue", "other", "--file", bad, "--database-url", url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "line 3: PAYLOAD must be a JSON object")
	require.Zero(t, q[int](t, pool, `select count(*)::int from queues.task where task_type = 'other'`), "nothing from a bad file")

	r = run(t, "enqueue", "other", "--file", bad, "--key", "k", "--database-url", url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "--key names one task")
	r = run(t, "enqueue", "other", "{}", "--file", bad, "--database-url", url)
	require.Equal(t, exitUsage, r.code)
	r = run(t, "enqueue", "other", "--file", filepath.Join(dir, "missing.jsonl"), "--database-url", url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "no such file")
	r = run(t, "enqueue", "report", "--database-url", url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "enqueue takes TYPE and PAYLOAD, or TYPE and --file FILE")
}
