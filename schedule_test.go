package taskorch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Schedules are added (or replaced), listed with their typed fields and removed from Go; a bad
// definition is ErrInvalidInput and writes nothing.
func TestSchedules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t)

	created, err := c.AddSchedule(ctx, &taskorch.ScheduleParams{
		Name: "nightly", Cron: "0 3 * * *", Args: greet{Name: "night"}, Priority: new(4), MaxAttempts: 3})
	require.NoError(t, err)
	require.True(t, created)
	created, err = c.AddSchedule(ctx, &taskorch.ScheduleParams{Name: "urgent", Cron: "@hourly", Args: urgentArgs{}, Disabled: true})
	require.NoError(t, err)
	require.True(t, created)

	ss, err := c.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, ss, 2)
	n := ss[0]
	require.Equal(t, "nightly", n.Name)
	require.Equal(t, "0 3 * * *", n.Cron)
	require.Equal(t, "greet", n.TaskType)
	require.JSONEq(t, `{"name": "night"}`, string(n.Payload))
	require.Equal(t, 4, n.Priority)
	require.Equal(t, 3, n.MaxAttempts)
	require.True(t, n.Enabled)
	require.NotNil(t, n.NextRunAt)
	require.True(t, n.NextRunAt.After(time.Now()))
	require.Zero(t, n.NextRunAt.UTC().Minute())
	require.Equal(t, 3, n.NextRunAt.UTC().Hour(), "the next tick, parsed as the leader parses it")
	require.Nil(t, n.LastTaskID)
	u := ss[1]
	require.Equal(t, "urgent", u.Name)
	require.Equal(t, 9, u.Priority, "the args' default priority")
	require.Equal(t, 2, u.MaxAttempts, "the args' default max attempts")
	require.False(t, u.Enabled)
	b, err := json.Marshal(u)
	require.NoError(t, err)
	require.Contains(t, string(b), `"task_type":"urgent"`)

	// Replacing keeps the name; an explicit priority of 0 overrides the args' default.
	created, err = c.AddSchedule(ctx, &taskorch.ScheduleParams{Name: "urgent", Cron: "@hourly", Args: urgentArgs{}, Priority: new(0)})
	require.NoError(t, err)
	require.False(t, created, "replaced")
	ss, err = c.Schedules(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, ss[1].Priority)
	require.True(t, ss[1].Enabled)

	for _, bad := range []struct {
		p    *taskorch.ScheduleParams
		want string
	}{
		{&taskorch.ScheduleParams{Name: "b", Cron: "every tuesday", Args: greet{}}, `cron "every tuesday"`},
		{&taskorch.ScheduleParams{Name: "b", Cron: "0 0 30 2 *", Args: greet{}}, "never fires"},
		{&taskorch.ScheduleParams{Name: "b", Cron: "61 * * * *", Args: greet{}}, `cron "61 * * * *"`},
		{&taskorch.ScheduleParams{Name: "no spaces", Cron: "@daily", Args: greet{}}, `name "no spaces"`},
		{&taskorch.ScheduleParams{Name: "b", Cron: "@daily", Args: raw("1bad", `{}`)}, "task type \"1bad\" is malformed"},
		{&taskorch.ScheduleParams{Name: "b", Cron: "@daily", Args: raw("t", `[]`)}, "must be a JSON object"},
		{&taskorch.ScheduleParams{Name: "b", Cron: "@daily"}, "args must not be nil"},
		{nil, "needs a *ScheduleParams"},
	} {
		_, err := c.AddSchedule(ctx, bad.p)
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, bad.want)
		require.ErrorContains(t, err, bad.want)
	}
	ss, err = c.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, ss, 2, "nothing written by the bad ones")

	require.NoError(t, c.RemoveSchedule(ctx, "nightly"))
	err = c.RemoveSchedule(ctx, "nightly")
	require.ErrorIs(t, err, taskorch.ErrNotFound)
	require.ErrorContains(t, err, `schedule "nightly" does not exist`)
	ss, err = c.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, ss, 1)
}

// The schedule functions' Tx twins follow their transaction.
func TestSchedulesTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	created, err := c.AddScheduleTx(ctx, tx, &taskorch.ScheduleParams{Name: "s", Cron: "*/5 * * * *", Args: raw("t", `{}`)})
	require.NoError(t, err)
	require.True(t, created)
	ss, err := c.SchedulesTx(ctx, tx)
	require.NoError(t, err)
	require.Len(t, ss, 1)
	ss, err = c.Schedules(ctx)
	require.NoError(t, err)
	require.Empty(t, ss, "not committed")
	require.NoError(t, c.RemoveScheduleTx(ctx, tx, "s"))
	require.ErrorIs(t, c.RemoveScheduleTx(ctx, tx, "s"), taskorch.ErrNotFound)
	_, err = c.AddScheduleTx(ctx, tx, &taskorch.ScheduleParams{Name: "s", Cron: "*/5 * * * *", Args: raw("t", `{}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))

	ss, err = c.Schedules(ctx)
	require.NoError(t, err)
	require.Empty(t, ss, "rolled back")
	require.ErrorIs(t, c.RemoveSchedule(ctx, "s"), taskorch.ErrNotFound)
}

// A schedule added from Go is run by the leader: a worker enqueues its ticks and runs them.
func TestScheduleRunsOnTheLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	ran := make(chan string, 10)
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(_ context.Context, task *taskorch.TaskFor[greet]) error {
		ran <- task.Args.Name
		return nil
	})
	_, err := c.AddSchedule(ctx, &taskorch.ScheduleParams{Name: "tick", Cron: "@every 1s", Args: greet{Name: "tick"}})
	require.NoError(t, err)
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})

	select {
	case name := <-ran:
		require.Equal(t, "tick", name)
	case <-time.After(20 * time.Second):
		t.Fatal("the schedule's task did not run")
	}
	key := scalar[string](t, pool, `select idempotency_key from queues.task where task_type = 'greet' order by task_id limit 1`)
	require.Regexp(t, `^schedule:tick:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, key)
	require.Eventually(t, func() bool {
		ss, err := c.Schedules(ctx)
		require.NoError(t, err)
		return ss[0].LastTaskID != nil
	}, 20*time.Second, 10*time.Millisecond)
}
