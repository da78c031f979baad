package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The processes mode polls rarely while far from the end and every 20 ms near it.
func TestPollInterval(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		done, total int64
		elapsed     time.Duration
		want        time.Duration
	}{
		{0, 20000, 0, 20 * time.Millisecond},                           // nothing known yet
		{1000, 20000, time.Second, 500 * time.Millisecond},             // 19 s to go: at most 500 ms
		{10000, 20000, 800 * time.Millisecond, 200 * time.Millisecond}, // 0.8 s to go: a quarter
		{19900, 20000, 10 * time.Second, 20 * time.Millisecond},        // 50 ms to go: 20 ms
	} {
		require.Equal(t, tt.want, pollInterval(tt.done, tt.total, tt.elapsed), "%+v", tt)
	}
}
