package taskorch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

type spawnerArgs struct{}

func (spawnerArgs) TaskType() string { return "dwf.spawner" }

type spawnedArgs struct{ N int }

func (spawnedArgs) TaskType() string { return "dwf.spawned" }

// Spawn enqueues a task once: the run that fails after it and the run after that get the same
// task's id, and one task exists, with the options given. Spawning a type that names a function,
// or with a key or parents, is refused and enqueues nothing.
func TestDurableWorkflowSpawn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	var runs atomic.Int32
	ids := make(chan int64, 4)
	refused := make(chan [3]error, 1)
	hs := taskorch.NewHandlers()
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, _ spawnerArgs) error {
		n := runs.Add(1)
		if n == 1 {
			_, e1 := taskorch.Spawn(wf, "bad-type", taskorch.RawArgs{Type: taskorch.TypeDBFunction, Payload: []byte(`{"db_function": "public.f"}`)}, nil)
			_, e2 := taskorch.Spawn(wf, "bad-key", spawnedArgs{}, &taskorch.EnqueueOpts{IdempotencyKey: "k"})
			_, e3 := taskorch.Spawn(wf, "bad-after", spawnedArgs{}, &taskorch.EnqueueOpts{After: []int64{wf.Task().ID}})
			refused <- [3]error{e1, e2, e3}
		}
		id, err := taskorch.Spawn(wf, "child", spawnedArgs{N: 7}, &taskorch.EnqueueOpts{Priority: new(3), MaxAttempts: 2})
		if err != nil {
			return err
		}
		ids <- id
		if n == 1 {
			return errors.New("crashed after the spawn")
		}
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	res, err := c.Enqueue(ctx, spawnerArgs{}, nil)
	require.NoError(t, err)
	waitStatus(t, pool, res.TaskID, taskorch.StatusCompleted)
	for _, e := range <-refused {
		require.ErrorIs(t, e, taskorch.ErrInvalidInput)
	}
	first, second := <-ids, <-ids
	require.Equal(t, first, second, "the run after the failure gets the task the first one spawned")
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task where task_type = 'dwf.spawned'`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.task where task_type = 'db_function'`))
	require.Equal(t, []int{3, 2, 7}, scalar[[]int](t, pool,
		`select array[priority, max_attempts, (payload->>'N')::int] from queues.task where task_id = $1`, first))
	require.Equal(t, []string{"spawn:child"}, scalar[[]string](t, pool,
		`select array_agg(kind || ':' || name order by seq) from queues.workflow_step where task_id = $1`, res.TaskID))
}

// The SQL side refuses, as the worker role, a spawn of a type that names a function (22023), and
// under a stale lease enqueues nothing (lease_lost).
func TestDurableWorkflowSpawnBadInput(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	id := scalar[int64](t, pool, `select queues.enqueue('dwf.sql', '{}')`)
	lease := claimOne(t, pool, "dwf.sql", id)
	for _, typ := range []string{"db_function", "email", "sms", "file_delete"} {
		sql := `select * from queues.spawn_workflow_task($1, $2, 1, 'x', '` + typ + `', '{"db_function": "public.f"}')`
		requireSQLState(t, probeAs(t, pool, "worker_service_user", sql, id, lease), "22023", "names a function", sql)
	}
	requireSQLState(t, probeAs(t, pool, "worker_service_user", `select * from queues.spawn_workflow_task($1, $2, 1, 'x', 'bad type', '{}')`, id, lease),
		"22023", ".", "bad type")
	require.Equal(t, "lease_lost", scalar[string](t, pool, `select outcome from queues.spawn_workflow_task($1, $2, 1, 'x', 'dwf.child', '{}')`, id, lease+1))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.task`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.workflow_step`))
}
