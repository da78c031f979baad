package bench_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/bench"
)

// The rate bench counts the claims of its span by claimed_at and never sees more in a second
// than the limit allows (burst + rate): the limiter's promise, whatever the machine's load. How
// much of the rate is delivered depends on the machine, so it is reported, not asserted.
func TestRate(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Rate(t.Context(), e, bench.RateConfig{Rate: 40, Burst: 2, Duration: time.Second, Warmup: 200 * time.Millisecond,
		WorkerOptions: bench.WorkerOptions{Workers: 2, Concurrency: 4}})
	require.NoError(t, err)
	require.Equal(t, 2, r.Workers)
	require.InDelta(t, 42.0, r.Ceiling, 0.001)
	require.Positive(t, r.Claims)
	require.LessOrEqual(t, float64(r.Claims), 2+40*1.0, "the span's claims within burst + rate × span")
	require.LessOrEqual(t, float64(r.MaxInASecond), r.Ceiling, "no second above burst + rate")
	require.InDelta(t, float64(r.Claims)/r.Seconds, r.Delivered, 0.001)
	require.InDelta(t, r.Delivered/40, r.Share, 0.001)
	m := asJSON(t, r)
	require.Equal(t, "rate", m["mode"])
	for _, k := range []string{"rate_per_second", "burst", "claims", "delivered_per_second", "share_of_rate", "max_claims_in_a_second", "ceiling_in_a_second"} {
		require.Contains(t, m, k)
	}
	_, err = bench.Rate(t.Context(), e, bench.RateConfig{Rate: -1})
	require.ErrorContains(t, err, "--rate must be above 0")
	_, err = bench.Rate(t.Context(), e, bench.RateConfig{Burst: -1})
	require.ErrorContains(t, err, "--burst must be at least 1")
}
