package admin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/maintenance"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Pause, resume and run now change what they say, each recorded with who did it: a resumed
// schedule starts at its next tick (what it missed is not replayed), a run leaves the next tick
// where it was.
func TestPauseResumeRunSchedule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	_, err := addSchedule(ctx, pool, ScheduleParams{Name: "hourly", Cron: "0 * * * *", TaskType: "report", Priority: 3}, t0)
	require.NoError(t, err)

	changed, err := PauseSchedule(ctx, pool, "hourly", "ann")
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = PauseSchedule(ctx, pool, "hourly", "ann")
	require.NoError(t, err)
	require.False(t, changed, "paused already")
	require.False(t, scalarBool(t, pool, `select enabled from queues.schedule where name = 'hourly'`))

	// A run while paused: one task now, the next tick unmoved.
	next := scalarTime(t, pool, `select next_run_at from queues.schedule where name = 'hourly'`)
	id, err := RunScheduleNow(ctx, pool, "hourly", "bob")
	require.NoError(t, err)
	var key string
	var prio int
	require.NoError(t, pool.QueryRow(ctx, `select idempotency_key, priority from queues.task where task_id = $1`, id).Scan(&key, &prio))
	require.Regexp(t, `^schedule:hourly:now:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, key)
	require.Equal(t, 3, prio)
	require.True(t, next.Equal(scalarTime(t, pool, `select next_run_at from queues.schedule where name = 'hourly'`)))

	later := t0.Add(5*time.Hour + 10*time.Minute)
	changed, err = resumeSchedule(ctx, pool, "hourly", "carl", later)
	require.NoError(t, err)
	require.True(t, changed)
	require.True(t, t0.Add(6*time.Hour).Equal(scalarTime(t, pool, `select next_run_at from queues.schedule where name = 'hourly'`)),
		"the first tick after now: the 5 missed while paused are not replayed")
	changed, err = ResumeSchedule(ctx, pool, "hourly", "carl")
	require.NoError(t, err)
	require.False(t, changed, "not paused")

	evs, err := ScheduleEvents(ctx, pool, "hourly", 10)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Equal(t, []string{"resumed carl", "run_now bob", "paused ann"},
		[]string{evs[0].Event + " " + evs[0].Actor, evs[1].Event + " " + evs[1].Actor, evs[2].Event + " " + evs[2].Actor})
	require.JSONEq(t, `{"task_id": `+itoa(id)+`}`, string(evs[1].Detail))

	for _, f := range []func() error{
		func() error { _, err := PauseSchedule(ctx, pool, "nope", ""); return err },
		func() error { _, err := ResumeSchedule(ctx, pool, "nope", ""); return err },
		func() error { _, err := RunScheduleNow(ctx, pool, "nope", ""); return err },
	} {
		require.ErrorIs(t, f(), ErrScheduleNotFound)
	}
	_, err = PauseSchedule(ctx, pool, "bad name", "")
	require.ErrorIs(t, err, ErrInvalidInput)
}

// A backfill enqueues each tick of the window once, under the tick's own key: ticks the leader
// enqueued already are not enqueued again, nor are a second backfill's; an @every schedule's
// ticks are its own (anchored where it ticks). A window in the future or too long is refused.
func TestBackfillSchedule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	// Ticks must be past by the database's clock too: a day ago.
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-24 * time.Hour)
	now := t0.Add(10 * time.Hour)
	_, err := addSchedule(ctx, pool, ScheduleParams{Name: "hourly", Cron: "0 * * * *", TaskType: "report"}, t0)
	require.NoError(t, err)
	// The leader enqueued 14:00 already (through its insert: keys beginning schedule: are the
	// system's, which the enqueue functions refuse).
	var leaderTask int64
	require.NoError(t, pool.QueryRow(ctx, `select task_id from internal.insert_schedule_task(
		(select s from queues.schedule s where s.name = 'hourly'), $1, $2)`,
		t0.Add(2*time.Hour), maintenance.ScheduleTickKey("hourly", t0.Add(2*time.Hour))).Scan(&leaderTask))

	dry, err := backfillSchedule(ctx, pool, "hourly", t0.Add(time.Hour), t0.Add(4*time.Hour), "ann", true, now)
	require.NoError(t, err)
	require.Len(t, dry.Ticks, 4, "13:00 to 16:00, both included")
	require.Zero(t, count(t, pool, `select count(*) from queues.task where idempotency_key like 'schedule:hourly:%'`)-1, "a dry run enqueues nothing")

	b, err := backfillSchedule(ctx, pool, "hourly", t0.Add(time.Hour), t0.Add(4*time.Hour), "ann", false, now)
	require.NoError(t, err)
	require.Equal(t, 3, b.Enqueued)
	require.Equal(t, 1, b.Existing, "14:00, the leader's")
	b, err = backfillSchedule(ctx, pool, "hourly", t0, t0.Add(4*time.Hour+30*time.Minute), "bob", false, now)
	require.NoError(t, err)
	require.Equal(t, 1, b.Enqueued, "12:00 only")
	require.Equal(t, 4, b.Existing)
	for h := range 5 {
		tick := t0.Add(time.Duration(h) * time.Hour)
		require.Equal(t, int64(1), count(t, pool, `select count(*) from queues.task where idempotency_key = $1 and scheduled_at = $2`,
			maintenance.ScheduleTickKey("hourly", tick), tick), "tick %s once", tick)
	}
	evs, err := ScheduleEvents(ctx, pool, "hourly", 10)
	require.NoError(t, err)
	require.Len(t, evs, 2, "the dry run is not recorded")
	require.Equal(t, "backfilled", evs[0].Event)
	require.Equal(t, "bob", evs[0].Actor)
	var detail struct {
		Enqueued  int       `json:"enqueued"`
		Existing  int       `json:"existing"`
		FirstTick time.Time `json:"first_tick"`
		LastTick  time.Time `json:"last_tick"`
	}
	require.NoError(t, json.Unmarshal(evs[0].Detail, &detail))
	require.Equal(t, 1, detail.Enqueued)
	require.Equal(t, 4, detail.Existing)
	require.True(t, t0.Equal(detail.FirstTick))
	require.True(t, t0.Add(4*time.Hour).Equal(detail.LastTick))

	// @every: ticks anchored at the schedule's own (its next_run_at, 30 s past the hour here).
	_, err = pool.Exec(ctx, `select queues.add_schedule('half', '@every 30m', 'report', _next_run_at => $1)`, t0.Add(30*time.Second))
	require.NoError(t, err)
	b, err = backfillSchedule(ctx, pool, "half", t0.Add(-time.Hour), t0, "", false, now)
	require.NoError(t, err)
	require.Equal(t, []time.Time{t0.Add(-59*time.Minute - 30*time.Second), t0.Add(-29*time.Minute - 30*time.Second)}, b.Ticks)

	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     error
	}{
		{"hourly", t0, now.Add(time.Minute), ErrInvalidInput}, // the future
		{"hourly", t0.Add(time.Hour), t0, ErrInvalidInput},    // backwards
		{"hourly", time.Time{}, t0, ErrInvalidInput},          // no start
		{"hourly", t0.AddDate(-3, 0, 0), t0, ErrInvalidInput}, // 26,000 ticks
		{"nope", t0, t0.Add(time.Hour), ErrScheduleNotFound},
	} {
		_, err := backfillSchedule(ctx, pool, tc.name, tc.from, tc.to, "", false, now)
		require.ErrorIs(t, err, tc.want, "%+v", tc)
	}
	// The SQL refuses what the Go side would not send: a tick in the future, none, NULL.
	for _, sql := range []string{
		`select * from queues.backfill_schedule('hourly', array[now() + interval '1 hour'])`,
		`select * from queues.backfill_schedule('hourly', '{}')`,
		`select * from queues.backfill_schedule('hourly', array[null::timestamptz])`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.ErrorContains(t, err, "backfill_schedule: ", sql)
		require.ErrorContains(t, err, "SQLSTATE 22023", sql)
	}
}

func scalarBool(t *testing.T, db DB, sql string) bool {
	t.Helper()
	var v bool
	require.NoError(t, db.QueryRow(t.Context(), sql).Scan(&v))
	return v
}

func scalarTime(t *testing.T, db DB, sql string) time.Time {
	t.Helper()
	var v time.Time
	require.NoError(t, db.QueryRow(t.Context(), sql).Scan(&v))
	return v
}
