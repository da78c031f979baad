package main

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// deploymentExample is the fenced block after the marker line "<!-- example: name -->" of
// docs/deployment.md.
func deploymentExample(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSuffix(docBlock(t, "deployment.md", name), "\n")
}

// docs/deployment.md's autoscaling, as printed: the KEDA trigger's query, asked as the role the
// document creates, counts the email and sms tasks workers could run now — running, and due
// pending of a type not paused — and not waiting tasks, tasks scheduled later, a paused type's
// backlog, finished tasks or other types; the role reads no task row.
func TestAutoscalingQueryAsDocumented(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := openPool(t, dbtest.NewDBURL(t))

	var query string
	for line := range strings.SplitSeq(deploymentExample(t, "keda-postgresql"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "query: "); ok {
			var err error
			query, err = strconv.Unquote(v)
			require.NoError(t, err, "the query is one double-quoted YAML string: %s", v)
		}
	}
	require.NotEmpty(t, query, "the KEDA example has a query")

	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	role := "taskorch_autoscaler_" + hex.EncodeToString(b)
	grants := strings.ReplaceAll(deploymentExample(t, "keda-role"), "taskorch_autoscaler", role)
	_, err = pool.Exec(ctx, grants)
	require.NoError(t, err, grants)
	t.Cleanup(func() {
		name := pgx.Identifier{role}.Sanitize()
		_, _ = pool.Exec(ctx, `drop owned by `+name+`; drop role `+name)
	})

	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	depth := func() int64 {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `set local role `+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
		var n int64
		require.NoError(t, tx.QueryRow(ctx, query).Scan(&n), query)
		return n
	}
	require.Zero(t, depth())

	for range 3 { // email: 2 of them claimed (running), 1 left due
		exec(`select queues.enqueue('email', '{}')`)
	}
	exec(`select queues.claim_tasks('w-autoscale', 2, '5 minutes', array['email'])`)
	exec(`select queues.enqueue('email', '{}', _scheduled_at => now() + interval '1 hour')`) // later
	parent := enqueue(t, pool, "report.build", `{}`, 0)                                      // another type
	exec(`select queues.enqueue('email', '{}', _after => array[$1::bigint])`, parent)        // waiting
	exec(`select queues.enqueue('sms', '{}')`)                                               // due, then claimed
	exec(`select queues.claim_tasks('w-autoscale', 1, '5 minutes', array['sms'])`)
	for range 4 {
		exec(`select queues.enqueue('sms', '{}')`) // due, until the queue is paused
	}
	exec(`select queues.cancel_task(queues.enqueue('email', '{}'))`) // finished
	require.Equal(t, int64(2+1+1+4), depth())

	exec(`select queues.pause_queue('sms', 'test')`)
	require.Equal(t, int64(2+1+1), depth(), "a paused type's due tasks are not counted; its running one is")

	// The role may ask the number and read nothing else.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `set local role `+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `select payload from queues.task limit 1`)
	require.ErrorContains(t, err, "permission denied")
}
