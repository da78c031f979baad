package dispatch

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskorch/taskorch/transport"
)

// FaultConfig says how often Faults misdelivers a message, each a probability in [0, 1].
type FaultConfig struct {
	// Drop: the message is never sent, though Send reports it sent (a message the transport
	// lost). The reclaimer must send it again.
	Drop float64
	// Duplicate: the message is sent twice.
	Duplicate float64
	// Delay: the message is sent DelayBy later, in the background (after the task may have
	// been dispatched again, claimed, even completed).
	Delay float64
	// DelayBy is how late a delayed message is sent. Defaults to 500ms.
	DelayBy time.Duration
	// Seed makes the faults repeatable.
	Seed uint64
}

// FaultCounts is what Faults did.
type FaultCounts struct {
	Sent, Dropped, Duplicated, Delayed int64
}

// Faults wraps a real transport and misdelivers messages at send: drops, duplicates and delays
// them (fault injection for tests: the transport underneath is the real one).
type Faults struct {
	transport.Transport
	cfg FaultConfig
	ctx context.Context // bounds delayed sends

	mu  sync.Mutex
	rnd *rand.Rand

	sent, dropped, duplicated, delayed atomic.Int64
	pending                            sync.WaitGroup
}

// NewFaults wraps inner. Delayed sends run until ctx is done.
func NewFaults(ctx context.Context, inner transport.Transport, cfg FaultConfig) *Faults {
	if cfg.DelayBy <= 0 {
		cfg.DelayBy = 500 * time.Millisecond
	}
	return &Faults{Transport: inner, cfg: cfg, ctx: ctx, rnd: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))} //nolint:gosec // test faults, not security
}

// Send sends ids through the faults.
func (f *Faults) Send(ctx context.Context, ids []int64) error {
	var now, later []int64
	f.mu.Lock()
	for _, id := range ids {
		switch r := f.rnd.Float64(); {
		case r < f.cfg.Drop:
			f.dropped.Add(1)
		case r < f.cfg.Drop+f.cfg.Delay:
			f.delayed.Add(1)
			later = append(later, id)
		case r < f.cfg.Drop+f.cfg.Delay+f.cfg.Duplicate:
			f.duplicated.Add(1)
			now = append(now, id, id)
		default:
			now = append(now, id)
		}
	}
	f.mu.Unlock()
	if len(later) > 0 {
		f.pending.Go(func() {
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(f.cfg.DelayBy):
			}
			if f.Transport.Send(f.ctx, later) == nil {
				f.sent.Add(int64(len(later)))
			}
		})
	}
	if len(now) == 0 {
		return nil
	}
	err := f.Transport.Send(ctx, now)
	if err == nil {
		f.sent.Add(int64(len(now)))
	}
	return err
}

// Counts returns what Faults did so far.
func (f *Faults) Counts() FaultCounts {
	return FaultCounts{Sent: f.sent.Load(), Dropped: f.dropped.Load(), Duplicated: f.duplicated.Load(), Delayed: f.delayed.Load()}
}

// Wait waits for the delayed sends.
func (f *Faults) Wait() { f.pending.Wait() }
