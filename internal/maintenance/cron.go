package maintenance

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrInvalidSchedule is wrapped by the errors of ParseCron (and of admin.AddSchedule, which
// checks schedules with it) for a bad schedule.
var ErrInvalidSchedule = errors.New("invalid schedule")

// Cron is a parsed cron expression: 5 fields (minute hour day-of-month month day-of-week, in
// UTC unless prefixed with CRON_TZ=<zone>), or a descriptor (@yearly, @monthly, @weekly,
// @daily, @hourly, @every <duration>). Parsing is github.com/robfig/cron/v3's standard parser.
type Cron struct {
	expr  string
	sched cron.Schedule
}

// ParseCron parses a cron expression. Its error wraps ErrInvalidSchedule and says what is
// wrong. Spaces around the expression are ignored (queues.add_schedule stores it trimmed).
// Beyond the parser's own checks, it refuses what the parser would run but no schedule means:
// an expression that never fires (such as "0 0 30 2 *"), "@every" with a duration that is not
// positive (the parser runs it every second), the zone "Local" (the leader's own zone, not the
// database's) and the leap-second zones right/... (which PostgreSQL does not have). The
// database checks a schedule the same way (internal.check_cron), and
// TestAddScheduleAgreesWithTheLeader keeps the two in step.
func ParseCron(expr string) (*Cron, error) {
	spec := strings.Trim(expr, " ")
	s, err := parseStandard(spec)
	if err == nil {
		err = checkDescriptor(spec)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: cron %q: %v (want 5 fields: minute hour day-of-month month day-of-week, "+
			"e.g. \"*/15 * * * *\", or a descriptor such as @hourly or @every 10m)", ErrInvalidSchedule, expr, err)
	}
	c := &Cron{expr: expr, sched: s}
	// Five years ahead is how far robfig/cron looks; a date that does not exist is never found.
	if c.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("%w: cron %q never fires", ErrInvalidSchedule, expr)
	}
	return c, nil
}

// parseStandard is cron.ParseStandard, which panics on a time zone prefix with nothing after it
// ("CRON_TZ=UTC"): that is an error here.
func parseStandard(spec string) (s cron.Schedule, err error) {
	defer func() {
		if recover() != nil {
			s, err = nil, errors.New("a time zone prefix must be followed by a space and the schedule")
		}
	}()
	return cron.ParseStandard(spec)
}

// checkDescriptor refuses the zones "Local" and right/..., and an @every whose duration is not
// positive, in a spec the parser accepted.
func checkDescriptor(spec string) error {
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		zone, rest, _ := strings.Cut(spec[strings.IndexByte(spec, '=')+1:], " ")
		if zone == "Local" {
			return errors.New(`the time zone "Local" is the leader's own: name the zone`)
		}
		if strings.HasPrefix(zone, "right/") {
			return fmt.Errorf("the time zone %q counts leap seconds, which PostgreSQL's zones do not: name the zone without right/", zone)
		}
		spec = strings.TrimSpace(rest)
	}
	if every, ok := strings.CutPrefix(spec, "@every "); ok {
		if d, err := time.ParseDuration(every); err == nil && d <= 0 {
			return fmt.Errorf("@every needs a positive duration, got %s", every)
		}
	}
	return nil
}

// String returns the expression as given.
func (c *Cron) String() string { return c.expr }

// Next returns the first tick strictly after t, in UTC, or the zero time if there is none
// within five years.
func (c *Cron) Next(t time.Time) time.Time {
	n := c.sched.Next(t.UTC())
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// lastTick returns the latest tick in [from, now], where from is a tick (a schedule's
// next_run_at): the one the leader enqueues when it finds ticks missed (the catch-up policy:
// the most recent missed tick, once). ok is false when there is none.
func (c *Cron) lastTick(from, now time.Time) (tick time.Time, ok bool) {
	from, now = from.UTC(), now.UTC()
	if from.After(now) {
		return time.Time{}, false
	}
	// @every d: ticks are from, from+d, from+2d, ... (anchored where the schedule started).
	if every, isEvery := c.sched.(cron.ConstantDelaySchedule); isEvery {
		return from.Add(now.Sub(from) / every.Delay * every.Delay), true
	}
	// The first tick at or after from (ticks are whole seconds; Next is strictly after).
	first := c.Next(from.Add(-time.Nanosecond))
	if first.IsZero() || first.After(now) {
		return time.Time{}, false
	}
	// Find a tick near now without walking from first (which may be weeks back for a schedule
	// ticking every minute): look back from now over windows that double until one holds a
	// tick, then walk forward from there. The walk covers at most the ticks of the last window.
	last := first
	for d := time.Second; ; d *= 2 {
		start := now.Add(-d)
		if !start.After(first) {
			break
		}
		if t := c.Next(start); !t.IsZero() && !t.After(now) {
			last = t
			break
		}
	}
	for {
		t := c.Next(last)
		if t.IsZero() || t.After(now) {
			return last, true
		}
		last = t
	}
}

// maxCountedSkips bounds the walk that counts the ticks a catch-up skips (a minutely schedule
// down for months): the count stops there.
const maxCountedSkips = 100_000

// catchUp says what the leader enqueues for a schedule whose next tick, from (its next_run_at),
// is due at now: the ticks to enqueue, oldest first, and the ticks it skips. The catch-up
// policy (docs/operations.md, "Periodic schedules"): every tick in [from, now] that is at most
// window old (now-window <= tick) is enqueued, at most maxTicks of them (a later pass takes the
// rest); when no tick is that recent, the most recent tick is enqueued, once. The ticks before
// the first one enqueued are skipped: skipped counts them (at most maxCountedSkips) and
// firstSkipped is the oldest. No tick at all in [from, now] (from was not a tick): none.
func (c *Cron) catchUp(from, now time.Time, window time.Duration, maxTicks int) (ticks []time.Time, skipped int, firstSkipped time.Time) {
	from, now = from.UTC(), now.UTC()
	if from.After(now) || maxTicks < 1 {
		return nil, 0, time.Time{}
	}
	lo := now.Add(-window)
	if lo.Before(from) {
		lo = from
	}
	// @every d: ticks are from, from+d, from+2d, ... (anchored where the schedule started).
	if every, isEvery := c.sched.(cron.ConstantDelaySchedule); isEvery {
		d := every.Delay
		k := (lo.Sub(from) + d - 1) / d // the first tick at or after lo
		first := from.Add(k * d)
		if first.After(now) { // none in the window: the most recent one
			k = now.Sub(from) / d
			first = from.Add(k * d)
			return []time.Time{first}, int(min(int64(k), maxCountedSkips)), skippedFrom(k, from)
		}
		for t := first; !t.After(now) && len(ticks) < maxTicks; t = t.Add(d) {
			ticks = append(ticks, t)
		}
		return ticks, int(min(int64(k), maxCountedSkips)), skippedFrom(k, from)
	}
	first := c.Next(lo.Add(-time.Nanosecond))
	if first.IsZero() || first.After(now) {
		last, ok := c.lastTick(from, now)
		if !ok {
			return nil, 0, time.Time{}
		}
		first = last
	}
	for t := first; !t.IsZero() && !t.After(now) && len(ticks) < maxTicks; t = c.Next(t) {
		ticks = append(ticks, t)
	}
	// Count the ticks before first, from the first tick at or after from.
	for t := c.Next(from.Add(-time.Nanosecond)); !t.IsZero() && t.Before(first) && skipped < maxCountedSkips; t = c.Next(t) {
		if skipped == 0 {
			firstSkipped = t
		}
		skipped++
	}
	return ticks, skipped, firstSkipped
}

// skippedFrom is the oldest skipped tick of an @every schedule when k ticks from from on were
// skipped, or the zero time when none was.
func skippedFrom(k time.Duration, from time.Time) time.Time {
	if k == 0 {
		return time.Time{}
	}
	return from
}

// Between returns the ticks in [from, to], oldest first; ok is false when there are more than
// limit. An @every schedule's ticks are anchored at anchor, one of its ticks (its next_run_at or
// last tick), as the leader enqueues them; a zero anchor anchors them at from.
func (c *Cron) Between(from, to, anchor time.Time, limit int) (ticks []time.Time, ok bool) {
	from, to = from.UTC(), to.UTC()
	if to.Before(from) {
		return nil, true
	}
	next := c.Next
	first := c.Next(from.Add(-time.Nanosecond)) // ticks are whole seconds; Next is strictly after
	if every, isEvery := c.sched.(cron.ConstantDelaySchedule); isEvery {
		d := every.Delay
		if anchor.IsZero() {
			anchor = from
		}
		anchor = anchor.UTC()
		k := from.Sub(anchor) / d // toward zero: step to the first tick at or after from
		first = anchor.Add(k * d)
		for first.Before(from) {
			first = first.Add(d)
		}
		for first.Add(-d).Compare(from) >= 0 {
			first = first.Add(-d)
		}
		next = func(t time.Time) time.Time { return t.Add(d) }
	}
	for t := first; !t.IsZero() && !t.After(to); t = next(t) {
		if len(ticks) == limit {
			return ticks, false
		}
		ticks = append(ticks, t)
	}
	return ticks, true
}
