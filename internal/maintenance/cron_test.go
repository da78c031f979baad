package maintenance

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseCron(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		"* * * * *",
		"*/15 9-17 * * MON-FRI",
		"0 0 1 jan,jul *",
		"@hourly",
		"@every 10m",
		"CRON_TZ=Europe/Paris 0 9 * * *",
		" @hourly ",
	} {
		c, err := ParseCron(expr)
		require.NoError(t, err, expr)
		require.Equal(t, expr, c.String())
	}
	for expr, msg := range map[string]string{
		"":                      "empty spec",
		"* * * *":               "expected exactly 5 fields",
		"* * * * * *":           "expected exactly 5 fields",
		"61 * * * *":            "above maximum",
		"@fortnightly":          "unrecognized descriptor",
		"0 0 30 2 *":            "never fires",
		"CRON_TZ=Nowhere *":     "bad location",
		"@every 0s":             "@every needs a positive duration",
		"@every -5m":            "@every needs a positive duration",
		"CRON_TZ=UTC":           "a time zone prefix must be followed by a space",
		"CRON_TZ=Local @hourly": `the time zone "Local" is the leader's own`,
	} {
		_, err := ParseCron(expr)
		require.ErrorIs(t, err, ErrInvalidSchedule, expr)
		require.ErrorContains(t, err, msg, expr)
	}
}

func TestCronLastTick(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		cron, from, now, want string // want "" : no tick
	}{
		{"* * * * *", "2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z"},
		{"* * * * *", "2026-01-01T10:00:00Z", "2026-01-01T10:00:59Z", "2026-01-01T10:00:00Z"},
		{"* * * * *", "2026-01-01T10:00:00Z", "2026-01-01T10:05:30Z", "2026-01-01T10:05:00Z"},
		{"* * * * *", "2026-01-01T10:00:00Z", "2026-01-01T09:59:59Z", ""},
		{"* * * * *", "2026-01-01T00:00:00Z", "2026-03-01T12:34:56Z", "2026-03-01T12:34:00Z"},
		{"0 3 * * *", "2026-01-01T03:00:00Z", "2026-01-10T02:00:00Z", "2026-01-09T03:00:00Z"},
		{"0 3 * * *", "2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", ""}, // next_run_at set by hand, not a tick
		{"@every 10m", "2026-01-01T10:00:07Z", "2026-01-01T10:35:00Z", "2026-01-01T10:30:07Z"},
		{"@every 10m", "2026-01-01T10:00:07Z", "2026-01-01T10:00:07Z", "2026-01-01T10:00:07Z"},
	} {
		c, err := ParseCron(tc.cron)
		require.NoError(t, err)
		got, ok := c.lastTick(at(tc.from), at(tc.now))
		if tc.want == "" {
			require.False(t, ok, "%+v: got %s", tc, got)
			continue
		}
		require.True(t, ok, "%+v", tc)
		require.Equal(t, at(tc.want), got, "%+v", tc)
	}
}

// lastTick agrees with walking every tick from from, on random gaps.
func TestCronLastTickMatchesWalk(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, expr := range []string{"* * * * *", "*/7 * * * *", "5 */2 * * *", "* 3 * * *", "0 0 * * MON", "30 12 1,15 * *"} {
		c, err := ParseCron(expr)
		require.NoError(t, err)
		for range 200 {
			from := c.Next(base.Add(time.Duration(rng.Int64N(int64(30 * 24 * time.Hour)))))
			now := from.Add(time.Duration(rng.Int64N(int64(20 * 24 * time.Hour))))
			want := from
			for n := c.Next(from); !n.After(now); n = c.Next(n) {
				want = n
			}
			got, ok := c.lastTick(from, now)
			require.True(t, ok)
			require.Equal(t, want, got, "%s from %s now %s", expr, from, now)
		}
	}
}

func TestScheduleTickKey(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 5, 4, 3, 2, 1, 0, time.FixedZone("X", 3600))
	require.Equal(t, "schedule:nightly:2026-05-04T02:02:01Z", ScheduleTickKey("nightly", tick))
}

// catchUp agrees with walking every tick: the ticks of [from, now] within the window (or the
// last one when none is), at most maxTicks, and the count of those before them.
func TestCronCatchUpMatchesWalk(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, expr := range []string{"* * * * *", "*/7 * * * *", "5 */2 * * *", "0 0 * * MON", "@every 45s", "@every 1h30m"} {
		c, err := ParseCron(expr)
		require.NoError(t, err)
		for range 200 {
			from := c.Next(base.Add(time.Duration(rng.Int64N(int64(10 * 24 * time.Hour)))))
			now := from.Add(time.Duration(rng.Int64N(int64(3 * 24 * time.Hour))))
			window := time.Duration(rng.Int64N(int64(6 * time.Hour)))
			maxTicks := 1 + rng.IntN(50)
			var all []time.Time // every tick in [from, now]
			for tk := from; !tk.After(now); tk = c.Next(tk) {
				all = append(all, tk)
			}
			var want []time.Time
			first := -1
			for i, tk := range all {
				if !tk.Before(now.Add(-window)) {
					first = i
					break
				}
			}
			if first < 0 {
				first = len(all) - 1 // none in the window: the last one
			}
			want = all[first:min(len(all), first+maxTicks)]
			ticks, skipped, oldest := c.catchUp(from, now, window, maxTicks)
			require.Equal(t, want, ticks, "%s from %s now %s window %s", expr, from, now, window)
			require.Equal(t, first, skipped, "%s from %s now %s window %s", expr, from, now, window)
			if first > 0 {
				require.Equal(t, all[0], oldest)
			}
		}
	}
}

// Between lists the ticks of a window, an @every schedule's anchored at its own ticks.
func TestCronBetween(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	c, err := ParseCron("0 * * * *")
	require.NoError(t, err)
	ticks, ok := c.Between(at("2026-01-01T02:00:00Z"), at("2026-01-01T04:00:00Z"), time.Time{}, 10)
	require.True(t, ok)
	require.Equal(t, []time.Time{at("2026-01-01T02:00:00Z"), at("2026-01-01T03:00:00Z"), at("2026-01-01T04:00:00Z")}, ticks, "both ends included")
	_, ok = c.Between(at("2026-01-01T02:00:00Z"), at("2026-01-01T04:00:00Z"), time.Time{}, 2)
	require.False(t, ok, "more than the limit")

	e, err := ParseCron("@every 10m")
	require.NoError(t, err)
	anchor := at("2026-01-01T10:00:07Z")
	ticks, ok = e.Between(at("2026-01-01T09:31:00Z"), at("2026-01-01T10:05:00Z"), anchor, 10)
	require.True(t, ok)
	require.Equal(t, []time.Time{at("2026-01-01T09:40:07Z"), at("2026-01-01T09:50:07Z"), at("2026-01-01T10:00:07Z")}, ticks,
		"an anchor after the window's start")
	ticks, _ = e.Between(at("2026-01-01T09:30:07Z"), at("2026-01-01T10:00:07Z"), anchor, 10)
	require.Equal(t, []time.Time{at("2026-01-01T09:30:07Z"), at("2026-01-01T09:40:07Z"), at("2026-01-01T09:50:07Z"), at("2026-01-01T10:00:07Z")},
		ticks, "ticks on both ends")
	ticks, _ = e.Between(at("2026-01-01T10:31:00Z"), at("2026-01-01T10:55:00Z"), anchor, 10)
	require.Equal(t, []time.Time{at("2026-01-01T10:40:07Z"), at("2026-01-01T10:50:07Z")}, ticks, "an anchor before the window")
}
