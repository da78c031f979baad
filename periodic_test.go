package taskorch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

func schedulesByName(t *testing.T, c *taskorch.Client) map[string]taskorch.Schedule {
	t.Helper()
	ss, err := c.Schedules(t.Context())
	require.NoError(t, err)
	out := map[string]taskorch.Schedule{}
	for _, s := range ss {
		out[s.Name] = s
	}
	return out
}

// The leader makes the schedules declared in code (WorkerConfig.Periodic) those of its code:
// it adds them, and their ticks run; a later leader with other code updates the changed one
// (its pause kept) and removes the one no longer declared; a schedule added by hand under a
// declared name is left alone.
func TestPeriodicDeclaredInCode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	_, err = c.AddSchedule(ctx, &taskorch.ScheduleParams{Name: "p_hand", Cron: "@hourly", Args: raw("p_tick", `{"by": "hand"}`)})
	require.NoError(t, err)

	var ticks atomic.Int64
	hs := taskorch.NewHandlers()
	hs.HandleFunc("p_tick", func(context.Context, *taskorch.Task) error { ticks.Add(1); return nil })
	first, _ := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, LeaderTTL: 2 * time.Second, Periodic: []taskorch.PeriodicTask{
		{Name: "p_every", Cron: "@every 1s", Args: raw("p_tick", `{"n": 1}`)},
		{Name: "p_old", Cron: "@daily", Args: raw("p_tick", `{}`), MaxAttempts: 3},
		{Name: "p_hand", Cron: "@daily", Args: raw("p_tick", `{"by": "code"}`)},
	}})
	require.Eventually(t, func() bool { return len(schedulesByName(t, c)) == 3 }, 30*time.Second, 20*time.Millisecond)
	ss := schedulesByName(t, c)
	require.True(t, ss["p_every"].DeclaredInCode)
	require.True(t, ss["p_every"].Enabled)
	require.JSONEq(t, `{"n": 1}`, string(ss["p_every"].Payload))
	require.True(t, ss["p_old"].DeclaredInCode)
	require.Equal(t, 3, ss["p_old"].MaxAttempts)
	require.False(t, ss["p_hand"].DeclaredInCode, "the schedule added by hand is left alone")
	require.Equal(t, "@hourly", ss["p_hand"].Cron)
	require.JSONEq(t, `{"by": "hand"}`, string(ss["p_hand"].Payload))
	require.Eventually(t, func() bool { return ticks.Load() > 0 }, 30*time.Second, 20*time.Millisecond,
		"the declared schedule's ticks are enqueued and run")
	require.NoError(t, first.Stop(ctx))

	mustExec(t, pool, `select queues.pause_schedule('p_every', 'test')`)
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, LeaderTTL: 2 * time.Second, Periodic: []taskorch.PeriodicTask{
		{Name: "p_every", Cron: "@every 2s", Args: raw("p_tick", `{"n": 2}`)},
	}})
	require.Eventually(t, func() bool { _, old := schedulesByName(t, c)["p_old"]; return !old }, 30*time.Second, 20*time.Millisecond,
		"the schedule no longer declared is removed")
	ss = schedulesByName(t, c)
	require.Len(t, ss, 2)
	require.Equal(t, "@every 2s", ss["p_every"].Cron)
	require.JSONEq(t, `{"n": 2}`, string(ss["p_every"].Payload))
	require.False(t, ss["p_every"].Enabled, "the operator's pause is kept")
	require.True(t, ss["p_every"].DeclaredInCode)
	require.False(t, ss["p_hand"].DeclaredInCode)
}

// NewWorker refuses a periodic task it could not declare, and says which and why.
func TestPeriodicRefusesBadDeclarations(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	for _, tc := range []struct {
		p    []taskorch.PeriodicTask
		want string
	}{
		{[]taskorch.PeriodicTask{{Name: "bad name", Cron: "@hourly", Args: raw("x", `{}`)}}, `Periodic[0] ("bad name"): the name must be`},
		{[]taskorch.PeriodicTask{{Name: "a", Cron: "61 * * * *", Args: raw("x", `{}`)}}, `Periodic[0] ("a"): cron`},
		{[]taskorch.PeriodicTask{{Name: "a", Cron: "0 0 30 2 *", Args: raw("x", `{}`)}}, `never fires`},
		{[]taskorch.PeriodicTask{{Name: "a", Cron: "@hourly", Args: raw("x", `{}`)}, {Name: "a", Cron: "@daily", Args: raw("x", `{}`)}},
			`Periodic[1] ("a"): the name is declared twice`},
		{[]taskorch.PeriodicTask{{Name: "a", Cron: "@hourly", Args: raw("db_function", `{"db_function": "x.y"}`)}}, `names a function`},
		{[]taskorch.PeriodicTask{{Name: "a", Cron: "@hourly"}}, `args must not be nil`},
		{[]taskorch.PeriodicTask{{Name: "a", Cron: "@hourly", Args: raw("x", `[1]`)}}, `must be a JSON object`},
	} {
		_, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Periodic: tc.p})
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, tc.want)
		require.ErrorContains(t, err, tc.want)
	}
}

// queues.declare_schedules acts only for the current leader term, and refuses a type that names
// a function, writing nothing.
func TestDeclareSchedulesNeedsTheTermAndRefusesFunctions(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	require.Zero(t, scalar[int](t, pool,
		`select count(*) from queues.declare_schedules(1, '[{"name": "x", "cron": "@hourly", "task_type": "t"}]')`))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.schedule`), "no leader term: nothing written")

	// A leader term, as queues.acquire_leadership writes it (the test is the only "worker").
	term := scalar[int64](t, pool, `insert into queues.leader (name, worker_id, term, elected_at, expires_at)
		values ('default', 'w-declare', 7, now(), now() + interval '1 minute') returning term`)
	_, err := pool.Exec(t.Context(), `select * from queues.declare_schedules($1,
		'[{"name": "ok", "cron": "@hourly", "task_type": "t"}, {"name": "fn", "cron": "@hourly", "task_type": "db_function", "payload": {"db_function": "x.y"}}]')`, term)
	require.ErrorContains(t, err, `schedule 'fn' has task type db_function, which names a function`)
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.schedule`), "refused: nothing written")

	require.Equal(t, "ok created", scalar[string](t, pool, `select string_agg(schedule_name || ' ' || action, ',')
		from queues.declare_schedules($1, '[{"name": "ok", "cron": "@hourly", "task_type": "t"}]')`, term))
	require.Equal(t, "ok unchanged", scalar[string](t, pool, `select string_agg(schedule_name || ' ' || action, ',')
		from queues.declare_schedules($1, '[{"name": "ok", "cron": "@hourly", "task_type": "t"}]')`, term))
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.declare_schedules($1 - 1, '[]')`, term), "a stale term")
	require.Equal(t, 1, scalar[int](t, pool, `select count(*) from queues.schedule`))
	require.Equal(t, "ok removed", scalar[string](t, pool, `select string_agg(schedule_name || ' ' || action, ',')
		from queues.declare_schedules($1, '[]')`, term), "an empty list removes every schedule declared in code")
	require.Zero(t, scalar[int](t, pool, `select count(*) from queues.schedule`))
}
