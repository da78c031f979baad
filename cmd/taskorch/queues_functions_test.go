package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// queues list shows each SQL function as its own queue, db_function:<schema.function>; pausing
// db_function shows on every function's line, and the warning for a function no worker serves
// says any worker would.
func TestQueuesListPerFunction(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	pool := openPool(t, url)
	_, err := pool.Exec(t.Context(), `create schema billing;
		create function billing.recalc(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		select queues.enqueue('db_function', '{"db_function": "billing.recalc"}', now() - interval '1 minute');`)
	require.NoError(t, err)
	r := run(t, append([]string{"queues", "pause", "db_function", "--actor", "carol"}, db...)...)
	require.Equal(t, 0, r.code, r.err)

	r = run(t, append([]string{"queues", "list"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `^QUEUE +STATE +DUE +SCHEDULED +RUNNING +FAILED +DEAD +OLDEST DUE +WORKERS\n`+
		`db_function +paused by carol since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +0 +0 +0 +0 +0 +- +0\n`+
		`db_function:billing\.recalc +paused with db_function by carol since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +1 +0 +0 +0 +0 +\d+m? ?\d*s? ago +0 · unserved\n$`, r.out)
	require.Regexp(t, `^warning: no live worker claims db_function:billing\.recalc tasks: 1 due, the oldest waiting \S+; they wait for any taskorch worker\n$`, r.err)

	type queue struct {
		TaskType    string `json:"task_type"`
		State       string `json:"state"`
		Due         int64  `json:"due"`
		PausedBy    string `json:"paused_by"`
		PausedQueue string `json:"paused_queue"`
	}
	qs := runJSON[[]queue](t, append([]string{"queues", "list"}, db...)...)
	require.Equal(t, []queue{
		{TaskType: "db_function", State: "paused", PausedBy: "carol"},
		{TaskType: "db_function:billing.recalc", State: "paused", Due: 1, PausedBy: "carol", PausedQueue: "db_function"},
	}, qs)

	r = run(t, append([]string{"queues", "resume", "db_function"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	qs = runJSON[[]queue](t, append([]string{"queues", "list"}, db...)...)
	require.Equal(t, []queue{{TaskType: "db_function:billing.recalc", State: "running", Due: 1}}, qs)
}
