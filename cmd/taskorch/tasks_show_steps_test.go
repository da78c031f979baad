package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// `taskorch tasks show` prints a durable workflow's checkpoints (docs/workflows.md, "Durable
// workflows in Go") in call order, with a secret in a step's result masked, in the table and in
// --json; a task without checkpoints prints no steps section.
func TestTasksShowWorkflowSteps(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	id := enqueue(t, pool, "signup", `{}`, 0)
	plain := enqueue(t, pool, "other", `{}`, 0)
	lease := q[int64](t, pool, `select lease_id from queues.claim_tasks_by_id('w', array[$1::bigint], interval '5 minutes', array['signup'])`, id)
	for _, sql := range []string{
		`select recorded from queues.record_workflow_step($1, $2, 1, 'step_tx', 'create-account', '{"account": 7, "api_key": "ak_LEAK"}')`,
		`select recorded from queues.record_workflow_step($1, $2, 2, 'sleep', 'a-day-later', null, interval '1 day')`,
	} {
		require.True(t, q[bool](t, pool, sql, id, lease), sql)
	}
	env := []string{"DATABASE_URL=" + url}

	r := runBinary(t, env, "tasks", "show", fmt.Sprint(id))
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, "\nworkflow steps:\n")
	require.Regexp(t, `(?m)^\s+1\s+step_tx\s+create-account\s+1\s+\S+\s+-\s+\{"account":7,"api_key":"x+"\}$`, r.out)
	require.Regexp(t, `(?m)^\s+2\s+sleep\s+a-day-later\s+1\s+\S+\s+\d{4}-\S+\s*$`, r.out)
	require.NotContains(t, r.out, "ak_LEAK")

	r = runBinary(t, env, "tasks", "show", fmt.Sprint(id), "--json")
	require.Equal(t, 0, r.code, r.err)
	require.NotContains(t, r.out, "ak_LEAK")
	var out struct {
		History struct {
			Steps []struct {
				Position int             `json:"position"`
				Kind     string          `json:"kind"`
				Name     string          `json:"name"`
				Result   json.RawMessage `json:"result"`
			} `json:"steps"`
		} `json:"history"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.Len(t, out.History.Steps, 2)
	require.Equal(t, "create-account", out.History.Steps[0].Name)
	require.Equal(t, "sleep", out.History.Steps[1].Kind)

	r = runBinary(t, env, "tasks", "show", fmt.Sprint(plain))
	require.Equal(t, 0, r.code, r.err)
	require.NotContains(t, r.out, "workflow steps")
}
