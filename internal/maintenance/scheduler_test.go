package maintenance

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// t0 is a minute boundary the fake clocks start at.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// tickTasks returns the schedule's tasks by idempotency key, with their scheduled time.
func tickTasks(t *testing.T, db DB, name string) map[string]time.Time {
	t.Helper()
	rows, err := db.Query(t.Context(), `select idempotency_key, scheduled_at from queues.task where idempotency_key like $1`,
		"schedule:"+name+":%")
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var key string
		var at time.Time
		require.NoError(t, rows.Scan(&key, &at))
		_, dup := out[key]
		require.False(t, dup, key)
		out[key] = at
	}
	require.NoError(t, rows.Err())
	return out
}

// Two leaders that overlap — both believing they lead, with a term the database accepts — run
// the scheduler at the same ticks concurrently: each tick is enqueued once (the idempotency key).
func TestScheduleTicksOnceAcrossOverlappingLeaders(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	clock := &fakeClock{now: t0}
	term := lead(t, pool, "a")
	mustExec(t, pool, `select queues.add_schedule('every-minute', '* * * * *', 'tick', '{"x": 1}', _next_run_at => $1)`, t0)

	var ms []*Maintainer
	for _, id := range []string{"a", "b"} {
		cfg := testConfig(id, newEvents())
		cfg.Now = clock.Now
		m, err := New(pool, cfg)
		require.NoError(t, err)
		m.setLeader(term, time.Now().Add(time.Hour))
		ms = append(ms, m)
	}
	const ticks = 30
	for i := range ticks {
		clock.Set(t0.Add(time.Duration(i)*time.Minute + time.Duration(i%7)*time.Second))
		var wg sync.WaitGroup
		errs := make([]error, len(ms))
		for j, m := range ms {
			wg.Go(func() { errs[j] = m.enqueueDueTicks(ctx, term) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	}
	got := tickTasks(t, pool, "every-minute")
	require.Len(t, got, ticks)
	for i := range ticks {
		tick := t0.Add(time.Duration(i) * time.Minute)
		at, ok := got[ScheduleTickKey("every-minute", tick)]
		require.True(t, ok, "tick %s", tick)
		require.True(t, tick.Equal(at), "scheduled at the tick")
	}
	require.Equal(t, ticks, scalar[int](t, pool, `select count(*) from queues.task where task_type = 'tick' and payload = '{"x": 1}'`))
	var next, last time.Time
	require.NoError(t, pool.QueryRow(ctx, `select next_run_at, last_tick_at from queues.schedule`).Scan(&next, &last))
	require.Equal(t, t0.Add(ticks*time.Minute), next.UTC())
	require.Equal(t, t0.Add((ticks-1)*time.Minute), last.UTC())
}

// Real maintainers on a shared fake clock: each tick is enqueued once, by whichever is leader,
// before and after the leader stops and the other takes over.
func TestScheduleTicksOnceAcrossHandover(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	clock := &fakeClock{now: t0}
	mustExec(t, pool, `select queues.add_schedule('every-minute', '* * * * *', 'tick', _next_run_at => $1)`, t0)

	ev := newEvents()
	ms := map[string]*running{}
	for _, id := range []string{"a", "b"} {
		cfg := testConfig(id, ev)
		cfg.Now = clock.Now
		ms[id] = start(t, pool, cfg)
	}
	from := 0
	tickAt := func(i int) {
		t.Helper()
		tick := t0.Add(time.Duration(i) * time.Minute)
		clock.Set(tick.Add(time.Duration(i%5) * time.Second))
		ev.waitFrom(t, &from, fmt.Sprintf("tick %d", i), func(_ string, e Event) bool {
			return e.Kind == EventScheduled && e.Tick.Equal(tick)
		})
	}
	for i := range 5 {
		tickAt(i)
	}
	leader := ""
	for id, r := range ms {
		if r.IsLeader() {
			leader = id
		}
	}
	require.NotEmpty(t, leader)
	ms[leader].stop(t)
	for i := 5; i < 10; i++ {
		tickAt(i)
	}
	got := tickTasks(t, pool, "every-minute")
	require.Len(t, got, 10)
	for i := range 10 {
		_, ok := got[ScheduleTickKey("every-minute", t0.Add(time.Duration(i)*time.Minute))]
		require.True(t, ok, "tick %d", i)
	}
	require.Equal(t, 10, ev.count(kind(EventScheduled)), "no tick reported twice")
	require.Equal(t, 2, ev.count(kind(EventElected)))
}

// After missed ticks all older than the catch-up window (no leader for ten minutes, a window of
// one), only the most recent one is enqueued, the others are reported skipped, and the next is
// the first after now. A schedule added from SQL without next_run_at starts at the next tick.
func TestScheduleCatchUpAndStart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	clock := &fakeClock{now: t0.Add(10*time.Minute + 30*time.Second)}
	term := lead(t, pool, "a")
	mustExec(t, pool, `select queues.add_schedule('behind', '* * * * *', 'tick', _next_run_at => $1)`, t0)
	mustExec(t, pool, `select queues.add_schedule('fresh', '*/5 * * * *', 'tick')`)
	mustExec(t, pool, `select queues.add_schedule('off', '* * * * *', 'tick', _enabled => false, _next_run_at => $1)`, t0)
	mustExec(t, pool, `select queues.add_schedule('broken', '* * * * *', 'tick', _next_run_at => $1)`, t0)
	mustExec(t, pool, `update queues.schedule set cron = '99 * * * *' where name = 'broken'`) // bypassing the checks

	ev := newEvents()
	cfg := testConfig("a", ev)
	cfg.Now = clock.Now
	cfg.ScheduleCatchUp = time.Minute
	m, err := New(pool, cfg)
	require.NoError(t, err)
	m.setLeader(term, time.Now().Add(time.Hour))
	require.NoError(t, m.enqueueDueTicks(ctx, term))
	require.NoError(t, m.enqueueDueTicks(ctx, term)) // nothing more is due

	got := tickTasks(t, pool, "behind")
	require.Len(t, got, 1)
	_, ok := got[ScheduleTickKey("behind", t0.Add(10*time.Minute))]
	require.True(t, ok, "the most recent missed tick")
	_, missed := ev.wait(t, "ticks missed", kind(EventTicksMissed))
	require.Equal(t, "behind", missed.Schedule)
	require.Equal(t, 10, missed.Missed, "t0 to t0+9m, older than the window")
	require.True(t, t0.Equal(missed.Tick), "the oldest skipped")
	require.Equal(t, 1, ev.count(kind(EventTicksMissed)), "reported once")
	require.Empty(t, tickTasks(t, pool, "fresh"))
	require.Empty(t, tickTasks(t, pool, "off"))
	require.Empty(t, tickTasks(t, pool, "broken"))

	next := func(name string) time.Time {
		t.Helper()
		return scalar[time.Time](t, pool, `select next_run_at from queues.schedule where name = $1`, name).UTC()
	}
	require.Equal(t, t0.Add(11*time.Minute), next("behind"))
	require.Equal(t, t0.Add(15*time.Minute), next("fresh"))
	require.Equal(t, t0, next("off"))
	require.Equal(t, t0, next("broken"))

	// A schedule enabled again does not replay what it missed while disabled (admin.AddSchedule
	// gives the first tick after now as _next_run_at).
	mustExec(t, pool, `select queues.add_schedule('off', '* * * * *', 'tick', _next_run_at => $1)`, t0.Add(11*time.Minute))
	require.NoError(t, m.enqueueDueTicks(ctx, term))
	require.Empty(t, tickTasks(t, pool, "off"))
}

// The key the SQL builds is ScheduleTickKey.
func TestScheduleTickKeyMatchesSQL(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	tick := time.Date(2030, 7, 8, 9, 10, 0, 0, time.FixedZone("X", -5*3600))
	require.Equal(t, ScheduleTickKey("n", tick), scalar[string](t, pool, `select internal.schedule_tick_key('n', $1)`, tick))
}

// Ticks missed for less than the catch-up window (a handover, a short outage) are all enqueued,
// each once, oldest first, and marked late; older ones are skipped and reported; the schedule
// goes on from the first tick after the last one enqueued.
func TestScheduleCatchUpWithinWindow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	term := lead(t, pool, "a")
	mustExec(t, pool, `select queues.add_schedule('every-10s', '@every 10s', 'tick', _next_run_at => $1)`, t0)
	mustExec(t, pool, `select queues.add_schedule('minutely', '* * * * *', 'tick', _next_run_at => $1)`, t0)

	clock := &fakeClock{now: t0.Add(45 * time.Second)}
	ev := newEvents()
	cfg := testConfig("a", ev)
	cfg.Now = clock.Now
	cfg.ScheduleCatchUp = 3 * time.Minute
	cfg.ScheduleLateAfter = 2 * time.Second
	m, err := New(pool, cfg)
	require.NoError(t, err)
	m.setLeader(term, time.Now().Add(time.Hour))
	require.NoError(t, m.enqueueDueTicks(ctx, term))

	got := tickTasks(t, pool, "every-10s")
	require.Len(t, got, 5, "t0, +10s, +20s, +30s, +40s: every missed tick")
	for i := range 5 {
		tick := t0.Add(time.Duration(i) * 10 * time.Second)
		at, ok := got[ScheduleTickKey("every-10s", tick)]
		require.True(t, ok, "tick %s", tick)
		require.True(t, tick.Equal(at))
	}
	require.Equal(t, t0.Add(50*time.Second), scalar[time.Time](t, pool, `select next_run_at from queues.schedule where name = 'every-10s'`).UTC())
	late := ev.count(func(_ string, e Event) bool { return e.Kind == EventScheduled && e.Schedule == "every-10s" && e.Late })
	require.Equal(t, 5, late, "each enqueued at least 5 s after its tick, past ScheduleLateAfter")
	require.Zero(t, ev.count(kind(EventTicksMissed)), "nothing older than the window")
	var order []time.Time
	for _, e := range ev.list {
		if e.Kind == EventScheduled && e.Schedule == "every-10s" {
			order = append(order, e.Tick)
		}
	}
	require.True(t, slices.IsSortedFunc(order, func(a, b time.Time) int { return a.Compare(b) }), "oldest first")

	// Ten minutes later: the minutely schedule's last 3 ticks (the window) are enqueued, the 7
	// before them skipped; the @every schedule's too (19 ticks from the window's start, 42 skipped).
	clock.Set(t0.Add(10*time.Minute + 50*time.Second))
	require.NoError(t, m.enqueueDueTicks(ctx, term))
	got = tickTasks(t, pool, "minutely")
	require.Len(t, got, 1+3, "t0 in the first pass, then t0+8m to t0+10m")
	for _, minute := range []int{0, 8, 9, 10} {
		_, ok := got[ScheduleTickKey("minutely", t0.Add(time.Duration(minute)*time.Minute))]
		require.True(t, ok, "minute %d", minute)
	}
	var missed []Event
	for _, e := range ev.list {
		if e.Kind == EventTicksMissed {
			missed = append(missed, e)
		}
	}
	require.Len(t, missed, 2)
	bySchedule := map[string]Event{missed[0].Schedule: missed[0], missed[1].Schedule: missed[1]}
	require.Equal(t, 7, bySchedule["minutely"].Missed, "t0+1m to t0+7m")
	require.True(t, t0.Add(time.Minute).Equal(bySchedule["minutely"].Tick))
	require.Equal(t, 42, bySchedule["every-10s"].Missed, "t0+50s to t0+7m40s: before the window's first tick, t0+7m50s")
	require.True(t, t0.Add(50*time.Second).Equal(bySchedule["every-10s"].Tick))
	require.Len(t, tickTasks(t, pool, "every-10s"), 5+19, "then t0+7m50s to t0+10m50s")
}
