package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A diamond (a, then b and c, then d) run by a real worker process, and a dead task with a
// cancelled child: `taskorch workflows list` counts each workflow's tasks by status, `workflows
// show` prints the nodes and their edges (AFTER), both as tables and as --json. An unknown id, a
// task that is no workflow's, exits 3 with a clear message; an id that is not a number and a
// --limit out of 1..1000 exit 2.
func TestE2EWorkflowsCommands(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	a := enqueue(t, pool, "taskorch.noop", `{}`, 0)
	after := func(typ string, parents ...int64) int64 {
		return q[int64](t, pool, `select queues.enqueue($1, '{}', _after => $2)`, typ, parents)
	}
	b := after("taskorch.noop", a)
	c := after("taskorch.noop", a)
	d := after("taskorch.noop", b, c)
	bad := enqueue(t, pool, "taskorch.fail", `{"message": "no"}`, 1)
	child := after("taskorch.noop", bad)
	alone := enqueue(t, pool, "taskorch.noop", `{}`, 0)
	startWorkerProc(t, url)
	waitStatus(t, pool, d, "completed")
	waitStatus(t, pool, child, "cancelled")
	waitStatus(t, pool, alone, "completed")

	env := []string{"DATABASE_URL=" + url}
	r := runBinary(t, env, "workflows", "list")
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, "WORKFLOW")
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+2\s+1 dead, 1 cancelled$`, bad), r.out)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+4\s+4 completed$`, a), r.out)
	require.NotRegexp(t, fmt.Sprintf(`(?m)^%d\s`, alone), r.out)

	r = runBinary(t, env, "workflows", "list", "--json")
	require.Equal(t, 0, r.code, r.err)
	var list struct {
		Workflows []struct {
			ID     int64          `json:"workflow_id"`
			Tasks  int            `json:"tasks"`
			Counts map[string]int `json:"counts"`
		} `json:"workflows"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &list))
	require.Len(t, list.Workflows, 2)
	require.Equal(t, bad, list.Workflows[0].ID)
	require.Equal(t, map[string]int{"completed": 4}, list.Workflows[1].Counts)

	r = runBinary(t, env, "workflows", "show", fmt.Sprint(a))
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.out, fmt.Sprintf("workflow %d: 4 tasks (4 completed)\n", a))
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+taskorch.noop\s+completed\s+1\s+-$`, a), r.out)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+taskorch.noop\s+completed\s+1\s+%d$`, b, a), r.out)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+taskorch.noop\s+completed\s+1\s+%d,%d$`, d, b, c), r.out)

	r = runBinary(t, env, "workflows", "show", fmt.Sprint(bad), "--json")
	require.Equal(t, 0, r.code, r.err)
	var show struct {
		Workflow struct {
			ID    int64 `json:"workflow_id"`
			Nodes []struct {
				ID      int64   `json:"task_id"`
				Status  string  `json:"status"`
				Parents []int64 `json:"parents"`
			} `json:"nodes"`
		} `json:"workflow"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &show))
	require.Equal(t, bad, show.Workflow.ID)
	require.Len(t, show.Workflow.Nodes, 2)
	require.Equal(t, "dead", show.Workflow.Nodes[0].Status)
	require.Equal(t, "cancelled", show.Workflow.Nodes[1].Status)
	require.Equal(t, []int64{bad}, show.Workflow.Nodes[1].Parents)

	// `tasks show` names a task's parents and workflow.
	r = runBinary(t, env, "tasks", "show", fmt.Sprint(d))
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, fmt.Sprintf(`(?m)^after\s+%d, %d$`, b, c), r.out)
	require.Regexp(t, fmt.Sprintf(`(?m)^workflow\s+%d$`, a), r.out)

	for _, id := range []int64{alone, b, 987654321} {
		r = runBinary(t, env, "workflows", "show", fmt.Sprint(id))
		require.Equal(t, exitNotFound, r.code, r.err)
		require.Equal(t, fmt.Sprintf("taskorch: workflow %d: task not found\n", id), r.err)
		require.Empty(t, r.out)
	}
	r = runBinary(t, env, "workflows", "show", "abc")
	require.Equal(t, exitUsage, r.code, r.err)
	for _, n := range []string{"5000", "0", "-1"} {
		r = runBinary(t, env, "workflows", "list", "--limit", n)
		require.Equal(t, exitUsage, r.code, r.err)
		require.Equal(t, "taskorch: --limit must be between 1 and 1000, got "+n+"\n", r.err)
	}
}
