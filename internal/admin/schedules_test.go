package admin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// t0 is the minute boundary the schedules are added at.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func TestAddListRemoveSchedule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)

	created, err := addSchedule(ctx, pool, ScheduleParams{Name: "nightly", Cron: "0 3 * * *", TaskType: "report",
		Payload: json.RawMessage(`{"kind": "daily"}`), Priority: 5, MaxAttempts: 3}, t0)
	require.NoError(t, err)
	require.True(t, created)

	list, err := ListSchedules(ctx, pool)
	require.NoError(t, err)
	require.Len(t, list, 1)
	s := list[0]
	require.Equal(t, "nightly", s.Name)
	require.Equal(t, "0 3 * * *", s.Cron)
	require.Equal(t, "report", s.TaskType)
	require.JSONEq(t, `{"kind": "daily"}`, string(s.Payload))
	require.Equal(t, 5, s.Priority)
	require.Equal(t, 3, s.MaxAttempts)
	require.True(t, s.Enabled)
	require.Equal(t, time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC), s.NextRunAt.UTC())
	require.Nil(t, s.LastTickAt)

	// Replacing with the same cron keeps the next tick; a new cron moves it.
	created, err = addSchedule(ctx, pool, ScheduleParams{Name: "nightly", Cron: "0 3 * * *", TaskType: "report2"}, t0.Add(48*time.Hour))
	require.NoError(t, err)
	require.False(t, created)
	list, err = ListSchedules(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, "report2", list[0].TaskType)
	require.Equal(t, time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC), list[0].NextRunAt.UTC())
	_, err = addSchedule(ctx, pool, ScheduleParams{Name: "nightly", Cron: "0 4 * * *", TaskType: "report2"}, t0)
	require.NoError(t, err)
	list, err = ListSchedules(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, time.Date(2030, 1, 2, 4, 0, 0, 0, time.UTC), list[0].NextRunAt.UTC())

	for _, p := range []ScheduleParams{
		{Name: "x", Cron: "* * * *", TaskType: "t"},
		{Name: "x", Cron: "99 * * * *", TaskType: "t"},
		{Name: "bad name", Cron: "* * * * *", TaskType: "t"},
		{Name: "x", Cron: "* * * * *", TaskType: "9bad"},
		{Name: "x", Cron: "* * * * *", TaskType: "t", Payload: json.RawMessage(`[1]`)},
		{Name: "x", Cron: "* * * * *", TaskType: "t", MaxAttempts: -1},
	} {
		_, err := AddSchedule(ctx, pool, p)
		require.ErrorIs(t, err, ErrInvalidSchedule, "%+v", p)
	}
	_, err = AddSchedule(ctx, pool, ScheduleParams{Name: "x", Cron: "61 * * * *", TaskType: "t"})
	require.ErrorContains(t, err, `cron "61 * * * *": end of range (61) above maximum (59)`)

	// SQL checks what it is given directly, as the leader's parser would
	// (TestCheckCronAgreesWithTheLeader).
	_, err = pool.Exec(ctx, `select queues.add_schedule('x', '* * * *', 't')`)
	require.ErrorContains(t, err, "has 4 field(s): want 5")

	require.NoError(t, RemoveSchedule(ctx, pool, "nightly"))
	require.ErrorIs(t, RemoveSchedule(ctx, pool, "nightly"), ErrScheduleNotFound)
	list, err = ListSchedules(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, list)
}
