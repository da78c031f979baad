package humanize_test

import (
	"math"
	"testing"

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
