package dispatch

import (
	"context"
	"sync"
	"time"
)

// Health is whether a worker's transport is reachable, shared by its fetcher and its
// dispatcher: the first to see the transport fail marks it down, and both work from PostgreSQL
// alone until RunProber sees it answer again.
type Health struct {
	mu    sync.Mutex
	down  bool
	since time.Time
	up    chan struct{} // closed while up; a new open one during each outage
	probe chan struct{} // wakes the prober (capacity 1)

	// OnDown is called once per outage, when it begins, with the error that began it.
	OnDown func(err error)
	// OnUp is called when an outage ends, with its length.
	OnUp func(outage time.Duration)
}

// NewHealth returns a Health that is up.
func NewHealth() *Health {
	up := make(chan struct{})
	close(up)
	return &Health{up: up, probe: make(chan struct{}, 1)}
}

// IsDown reports whether the transport is marked unreachable.
func (h *Health) IsDown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// Up returns a channel closed while the transport is up (at once when it is up now).
func (h *Health) Up() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up
}

// MarkDown marks the transport unreachable because of err. It reports whether this began an
// outage (false when already down).
func (h *Health) MarkDown(err error) bool {
	h.mu.Lock()
	if h.down {
		h.mu.Unlock()
		return false
	}
	h.down, h.since, h.up = true, time.Now(), make(chan struct{})
	h.mu.Unlock()
	select {
	case h.probe <- struct{}{}:
	default:
	}
	if h.OnDown != nil {
		h.OnDown(err)
	}
	return true
}

// MarkUp ends an outage. It reports whether there was one.
func (h *Health) MarkUp() bool {
	h.mu.Lock()
	if !h.down {
		h.mu.Unlock()
		return false
	}
	outage := time.Since(h.since)
	h.down = false
	close(h.up)
	h.mu.Unlock()
	if h.OnUp != nil {
		h.OnUp(outage)
	}
	return true
}

// RunProber calls ping during each outage, every interval (doubling up to maxInterval), until
// it succeeds, then marks the transport up. It returns when ctx is done.
func (h *Health) RunProber(ctx context.Context, ping func(ctx context.Context) error, interval, maxInterval time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.probe:
		}
		wait := interval
		for h.IsDown() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			pctx, cancel := context.WithTimeout(ctx, max(maxInterval, 2*time.Second))
			err := ping(pctx)
			cancel()
			if err == nil {
				h.MarkUp()
				break
			}
			wait = min(wait*2, maxInterval)
		}
	}
}
