package humanize_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/humanize"
)

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0", 7: "7", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234", -999: "-999",
		math.MaxInt64: "9,223,372,036,854,775,807", math.MinInt64: "-9,223,372,036,854,775,808",
	} {
		require.Equal(t, want, humanize.Thousands(n), "%d", n)
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	const day, year = 24 * time.Hour, 365 * 24 * time.Hour
	for d, want := range map[time.Duration]string{
		0: "0s", 450 * time.Millisecond: "450ms", 45 * time.Second: "45s", 192 * time.Second: "3m 12s",
		5*time.Hour + 3*time.Minute: "5h 3m", 52 * time.Hour: "2d 4h", 3*year + 12*day: "3y 12d",
		humanize.Century - time.Second: "100y 24d", // 36,525 days: the leap days of a century
		humanize.Century:               "more than 100 years",
		math.MaxInt64:                  "more than 100 years",
		-192 * time.Second:             "-3m 12s",
		math.MinInt64:                  "-more than 100 years",
	} {
		require.Equal(t, want, humanize.Duration(d), "%d", int64(d))
	}
}

// A time far in the past or future (4713 BC, the year 294276) saturates instead of wrapping
// around to a negative duration.
func TestFromSecondsSaturates(t *testing.T) {
	t.Parallel()
	bc4713 := time.Since(time.Date(-4712, 1, 1, 0, 0, 0, 0, time.UTC)).Seconds() // saturated by time.Since
	require.Equal(t, time.Duration(math.MaxInt64), humanize.FromSeconds(bc4713))
	// What PostgreSQL says of 4713 BC: about 2.1e11 seconds ago; times 1e9 overflows int64.
	require.Equal(t, time.Duration(math.MaxInt64), humanize.FromSeconds(2.1e11))
	require.Equal(t, "more than 100 years", humanize.Duration(humanize.FromSeconds(2.1e11)))
	require.Equal(t, time.Duration(math.MinInt64), humanize.FromSeconds(-9.2e12))
	require.Equal(t, time.Duration(0), humanize.FromSeconds(math.NaN()))
	require.Equal(t, time.Duration(math.MaxInt64), humanize.FromSeconds(math.Inf(1)))
	require.Equal(t, 1500*time.Millisecond, humanize.FromSeconds(1.5))
}
