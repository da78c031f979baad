package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// `taskorch workflows cancel ID` cancels the workflow's tasks that have not ended, records the
// actor and reason, and says how many; again it cancels nothing. --json prints what it did. An
// id that is no workflow's exits 3, one that is not a number 2.
func TestE2EWorkflowsCancelCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	a := enqueue(t, pool, "wfcli.a", `{}`, 0)
	b := q[int64](t, pool, `select queues.enqueue('wfcli.b', '{}', _after => array[$1::bigint])`, a)
	c := q[int64](t, pool, `select queues.enqueue('wfcli.c', '{}', _after => array[$1::bigint])`, b)
	alone := enqueue(t, pool, "wfcli.alone", `{}`, 0)
	env := []string{"DATABASE_URL=" + url}

	r := runBinary(t, env, "workflows", "cancel", fmt.Sprint(a), "--reason", "order withdrawn", "--actor", "ann")
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, fmt.Sprintf("workflow %d: 3 task(s) cancelled\n", a), r.out)
	for _, id := range []int64{a, b, c} {
		require.Equal(t, "cancelled", q[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
		require.Equal(t, []string{"ann", "order withdrawn"}, q[[]string](t, pool,
			`select array[actor, detail] from queues.task_event where task_id = $1 and event = 'cancelled'`, id))
	}
	require.Equal(t, "pending", q[string](t, pool, `select status::text from queues.task where task_id = $1`, alone))

	r = runBinary(t, env, "workflows", "cancel", fmt.Sprint(a), "--json")
	require.Equal(t, 0, r.code, r.err)
	var res struct {
		ID        int64 `json:"workflow_id"`
		Cancelled int64 `json:"cancelled"`
		Skipped   int64 `json:"skipped"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &res))
	require.Equal(t, a, res.ID)
	require.Zero(t, res.Cancelled)

	for _, id := range []int64{alone, b, 987654321} {
		r = runBinary(t, env, "workflows", "cancel", fmt.Sprint(id))
		require.Equal(t, exitNotFound, r.code, r.err)
		require.Equal(t, fmt.Sprintf("taskorch: cancel_workflow: workflow %d does not exist\n", id), r.err)
	}
	require.Equal(t, "pending", q[string](t, pool, `select status::text from queues.task where task_id = $1`, alone))
	r = runBinary(t, env, "workflows", "cancel", "abc")
	require.Equal(t, exitUsage, r.code, r.err)
}
