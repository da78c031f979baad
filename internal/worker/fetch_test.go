package worker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClaimSize: the fetcher claims in chunks of at least half its room, except for a free slot
// that nothing would fill.
func TestClaimSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                                  string
		free, target, buffered, asked, flight int
		want                                  int
	}{
		{"idle worker, all slots free", 16, 0, 0, 0, 0, 16},
		{"one slot free, nothing buffered, nothing asked", 1, 0, 0, 0, 0, 1},
		{"one slot free with a target: claims the room", 1, 40, 0, 0, 0, 41},
		{"buffer covers the free slots, little missing", 1, 40, 35, 0, 0, 0},
		{"a quarter missing: waits", 1, 40, 30, 0, 0, 0},
		{"just under half missing: waits", 1, 40, 21, 0, 0, 0},
		{"half missing: claims it", 1, 40, 20, 0, 0, 21},
		{"free slot, its task already asked for", 1, 40, 0, 38, 1, 0},
		{"free slot that nothing fills, a claim in flight: waits for it", 2, 40, 0, 38, 1, 0},
		{"free slot that nothing fills, no claim in flight: claims at once", 16, 0, 15, 0, 0, 1},
		{"the same with a claim in flight: waits for it", 16, 0, 14, 1, 1, 0},
		{"free slot starving with a claim in flight, half missing", 2, 40, 0, 20, 1, 22},
		{"free slot starving with a claim in flight, under half missing", 2, 40, 0, 22, 1, 0},
		{"full", 0, 40, 40, 0, 0, 0},
		{"over full (target fell)", 0, 10, 30, 0, 0, 0},
		{"no claiming ahead, one slot frees of sixteen", 1, 0, 0, 0, 0, 1},
		{"no claiming ahead, slots free while a claim flies, half or more", 4, 0, 0, 0, 1, 4},
		{"no claiming ahead, one slot frees while a claim flies", 1, 0, 0, 3, 1, 0},
	} {
		require.Equal(t, c.want, claimSize(c.free, c.target, c.buffered, c.asked, c.flight), c.name)
	}
}
