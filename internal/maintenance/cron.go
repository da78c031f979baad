package maintenance

import (
	"errors"
	"fmt"
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
// wrong. An expression that never fires (such as "0 0 30 2 *") is refused.
func ParseCron(expr string) (*Cron, error) {
	s, err := cron.ParseStandard(expr)
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
