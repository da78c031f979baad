package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// tasks show prints a completed task's result, in the table and in --json; a task without one
// has no result line.
func TestTasksShowResult(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	pool := openPool(t, url)
	ctx := t.Context()
	with := enqueue(t, pool, "r", `{}`, 3)
	without := enqueue(t, pool, "r", `{}`, 3)
	var lease1, lease2 int64
	require.NoError(t, pool.QueryRow(ctx, `select lease_id from queues.claim_tasks('w', 1) where task_id = $1`, with).Scan(&lease1))
	require.NoError(t, pool.QueryRow(ctx, `select lease_id from queues.claim_tasks('w', 1) where task_id = $1`, without).Scan(&lease2))
	_, err := pool.Exec(ctx, `select * from queues.complete_tasks_with_results($1, $2, array['{"url": "s3://b/k", "n": [1, 2]}', null]::jsonb[])`,
		[]int64{with, without}, []int64{lease1, lease2})
	require.NoError(t, err)

	r := run(t, append([]string{"tasks", "show", itoa(with)}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^result +\{"n": \[1, 2\], "url": "s3://b/k"\}$`, r.out)
	shown := runJSON[struct{ Task taskorch.Task }](t, append([]string{"tasks", "show", itoa(with)}, db...)...)
	require.JSONEq(t, `{"url": "s3://b/k", "n": [1, 2]}`, string(shown.Task.Result))

	r = run(t, append([]string{"tasks", "show", itoa(without)}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.NotRegexp(t, `(?m)^result `, r.out)
	var raw map[string]map[string]json.RawMessage
	r = run(t, append([]string{"tasks", "show", itoa(without), "--json"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	require.NoError(t, json.Unmarshal([]byte(r.out), &raw))
	require.NotContains(t, raw["task"], "result")
}
