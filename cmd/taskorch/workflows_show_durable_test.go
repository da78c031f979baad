package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// `taskorch workflows show` prints a durable workflow's steps in call order, each with its
// status, attempt, duration, what it waits for and until when, in the table and in --json: one
// asleep, one waiting for a signal (then received it and running again), one waiting for a task
// it awaits; a step's secret is masked; a task with no checkpoint is no workflow (exit 3).
func TestWorkflowsShowDurableSteps(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	env := []string{"DATABASE_URL=" + url}
	claim := func(id int64) int64 {
		t.Helper()
		return q[int64](t, pool, `select lease_id from queues.claim_tasks_by_id('w', array[$1::bigint], interval '5 minutes', array['signup'])`, id)
	}
	record := func(id, lease int64, sql string) {
		t.Helper()
		require.True(t, q[bool](t, pool, sql, id, lease), sql)
	}

	// Asleep: a StepTx that took 2 s, a Step, then a sleep of a day.
	asleep := enqueue(t, pool, "signup", `{}`, 0)
	lease := claim(asleep)
	record(asleep, lease, `select recorded from queues.record_workflow_step($1, $2, 1, 'step_tx', 'create-account',
	    '{"account": 7, "api_key": "ak_LEAK"}', null, clock_timestamp() - interval '2 seconds')`)
	record(asleep, lease, `select recorded from queues.record_workflow_step($1, $2, 2, 'step', 'send-mail', '"sent"', null, clock_timestamp())`)
	record(asleep, lease, `select recorded from queues.record_workflow_step($1, $2, 3, 'sleep', 'a-day-later', null, interval '1 day')`)
	record(asleep, lease, `select queues.snooze_task($1, $2, now() + interval '1 day')`)

	r := runBinary(t, env, "workflows", "show", fmt.Sprint(asleep))
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, fmt.Sprintf("durable workflow %d (signup): pending, attempt 0\n", asleep))
	require.Regexp(t, `(?m)^\s+1\s+step_tx\s+create-account\s+completed\s+1\s+2(\.\d+)?s\s+-\s+-\s+\{"account":7,"api_key":"x+"\}$`, r.out)
	require.Regexp(t, `(?m)^\s+2\s+step\s+send-mail\s+completed\s+1\s+\S+\s+-\s+-\s+"sent"$`, r.out)
	require.Regexp(t, `(?m)^\s+3\s+sleep\s+a-day-later\s+sleeping\s+1\s+\S+\s+time\s+\d{4}-\S+Z\s+-$`, r.out)
	require.NotContains(t, r.out, "ak_LEAK")

	r = runBinary(t, env, "workflows", "show", fmt.Sprint(asleep), "--json")
	require.Equal(t, 0, r.code, r.err)
	require.NotContains(t, r.out, "ak_LEAK")
	var out struct {
		Workflow json.RawMessage `json:"workflow"`
		Durable  struct {
			TaskID int64  `json:"task_id"`
			Status string `json:"status"`
			Steps  []struct {
				Position int      `json:"position"`
				Kind     string   `json:"kind"`
				Status   string   `json:"status"`
				Duration *float64 `json:"duration_seconds"`
				WaitsFor string   `json:"waits_for"`
				Until    *string  `json:"until"`
			} `json:"steps"`
		} `json:"durable"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.Nil(t, out.Workflow, "a durable workflow alone is no graph")
	require.Equal(t, asleep, out.Durable.TaskID)
	require.Equal(t, "pending", out.Durable.Status)
	require.Len(t, out.Durable.Steps, 3)
	require.NotNil(t, out.Durable.Steps[0].Duration)
	require.GreaterOrEqual(t, *out.Durable.Steps[0].Duration, 2.0)
	require.Equal(t, "sleeping", out.Durable.Steps[2].Status)
	require.Equal(t, "time", out.Durable.Steps[2].WaitsFor)
	require.NotNil(t, out.Durable.Steps[2].Until)

	// Waiting for a signal: its name and key, until the deadline.
	signalled := enqueue(t, pool, "signup", `{}`, 0)
	lease = claim(signalled)
	record(signalled, lease, `select recorded from queues.record_workflow_step($1, $2, 1, 'signal_wait', 'confirmed', '{"key": "u7"}', interval '1 hour')`)
	require.Equal(t, "waiting", q[string](t, pool, `select outcome from queues.await_workflow_signal($1, $2, 2, 'confirmed', 'u7', now() + interval '1 hour')`, signalled, lease))
	r = runBinary(t, env, "workflows", "show", fmt.Sprint(signalled))
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^\s+1\s+signal_wait\s+confirmed\s+waiting\s+1\s+\S+\s+signal "confirmed" key "u7"\s+\d{4}-\S+Z\s+\{"key": ?"u7"\}$`, r.out)

	// The signal comes; the next run records it and is in flight.
	require.True(t, q[bool](t, pool, `select queues.signal('confirmed', 'u7', '{"ok": true}')`))
	lease = claim(signalled)
	require.Equal(t, "received", q[string](t, pool, `select outcome from queues.await_workflow_signal($1, $2, 2, 'confirmed', 'u7', now() + interval '1 hour')`, signalled, lease))
	r = runBinary(t, env, "workflows", "show", fmt.Sprint(signalled))
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, fmt.Sprintf("durable workflow %d (signup): running, attempt 1\n", signalled))
	require.Regexp(t, `(?m)^\s+1\s+signal_wait\s+confirmed\s+completed\s`, r.out)
	require.Regexp(t, `(?m)^\s+2\s+signal\s+confirmed\s+received\s+1\s`, r.out)
	require.Regexp(t, `(?m)^\s+3\s+-\s+-\s+running\s+-\s+-\s+-\s+-\s+-$`, r.out)

	// Awaiting a task that has not ended: the call is recorded once it has; meanwhile the row
	// says what it waits for.
	awaiting := enqueue(t, pool, "signup", `{}`, 0)
	child := enqueue(t, pool, "other", `{}`, 0)
	lease = claim(awaiting)
	record(awaiting, lease, `select recorded from queues.record_workflow_step($1, $2, 1, 'step', 'prepare', 'true')`)
	require.Equal(t, "waiting", q[string](t, pool, `select outcome from queues.await_workflow_tasks($1, $2, 2, 'children', array[$3::bigint])`, awaiting, lease, child))
	r = runBinary(t, env, "workflows", "show", fmt.Sprint(awaiting))
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, fmt.Sprintf("durable workflow %d (signup): waiting", awaiting))
	require.Regexp(t, fmt.Sprintf(`(?m)^\s+2\s+await\s+-\s+waiting\s+-\s+-\s+tasks %d\s+-\s+-$`, child), r.out)

	// A task without checkpoints (nor children) is no workflow.
	r = runBinary(t, env, "workflows", "show", fmt.Sprint(enqueue(t, pool, "other", `{}`, 0)))
	require.Equal(t, 3, r.code, r.out)
}
