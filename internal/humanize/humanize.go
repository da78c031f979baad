// Package humanize formats numbers for people to read: the dashboard's counts and durations,
// the command line's durations, and the reports of taskorch bench and the chaos harness.
package humanize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Century is the longest duration that Duration spells out: anything longer (a task or a
// schedule in 4713 BC or in the year 294276) reads "more than 100 years".
const Century = 36525 * 24 * time.Hour

// Duration writes d in its two largest units: 0s, 450ms, 45s, 3m 12s, 5h 3m, 2d 4h, 3y 12d (a
// year is 365 days). It saturates: from Century on, "more than 100 years". A negative d gets
// a minus sign.
func Duration(d time.Duration) string {
	if d < 0 {
		return "-" + Duration(d.Abs())
	}
	s := int64(d / time.Second)
	const day, year = 86400, 365 * 86400
	switch {
	case d >= Century:
		return "more than 100 years"
	case d == 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm %ds", s/60, s%60)
	case s < day:
		return fmt.Sprintf("%dh %dm", s/3600, s%3600/60)
	case s < year:
		return fmt.Sprintf("%dd %dh", s/day, s%day/3600)
	default:
		return fmt.Sprintf("%dy %dd", s/year, s%year/day)
	}
}

// FromSeconds converts a number of seconds (from SQL's extract(epoch ...), which may be far
// beyond what a time.Duration holds) to a time.Duration, saturating at its bounds instead of
// overflowing. NaN is 0.
func FromSeconds(s float64) time.Duration {
	switch ns := s * float64(time.Second); {
	case math.IsNaN(ns):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	default:
		return time.Duration(ns)
	}
}

// Thousands formats n with comma thousands separators: 1234567 -> "1,234,567".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
