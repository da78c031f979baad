package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// leaderState is what this worker knows of its leadership: the term it was elected with and
// until when it may act on it, by its own monotonic clock. The deadline is the start of the
// call that took or renewed the lease plus LeaderTTL, so it passes no later than the lease in
// the database (which starts at the database's now(), later than that) as long as the clocks
// run at the same rate: the worker stops acting before anyone else can be elected.
type leaderState struct {
	mu       sync.Mutex
	term     int64
	deadline time.Time

	reported int64 // the term last reported by EventElected, 0 after EventDeposed
}

// IsLeader reports whether this worker holds the leader lease now.
func (m *Maintainer) IsLeader() bool { return m.Term() != 0 }

// Term returns the term of the leader lease this worker holds now, or 0 when it is not the
// leader. Leader actions carry it; the database refuses them under a stale term.
func (m *Maintainer) Term() int64 {
	m.leader.mu.Lock()
	defer m.leader.mu.Unlock()
	if m.leader.term == 0 || !time.Now().Before(m.leader.deadline) {
		return 0
	}
	return m.leader.term
}

// runLeadership tries to take the leader lease every LeaderPollInterval (a read while the
// leader lives), and renews it every LeaderTTL/3 while it holds it, once the worker is
// registered. A registration or a lost session makes it try at once.
func (m *Maintainer) runLeadership(ctx context.Context) {
	renew := m.cfg.LeaderTTL / 3
	poll := min(renew, m.cfg.LeaderPollInterval)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.leaderWake:
		}
		m.tryLeadership(ctx, renew)
		wait := poll
		if m.IsLeader() {
			wait = renew
		}
		t.Reset(wait)
	}
}

// tryLeadership takes or renews the leader lease once.
func (m *Maintainer) tryLeadership(ctx context.Context, renew time.Duration) {
	if !m.registered.Load() {
		m.setLeader(0, time.Time{})
		return
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, callTimeout(renew))
	defer cancel()
	var term *int64
	err := m.pool.QueryRow(cctx, `select queues.acquire_leadership($1, $2, $3)`, m.cfg.WorkerID, m.cfg.LeaderTTL, m.instance).Scan(&term)
	switch {
	case err != nil:
		m.fail(ctx, "leadership", fmt.Errorf("acquire leadership: %w", err))
		m.reportLeadership() // the lease runs until its deadline, unrenewed
	case term == nil:
		m.setLeader(0, time.Time{})
	default:
		m.setLeader(*term, start.Add(m.cfg.LeaderTTL))
	}
}

// wakeLeadership makes runLeadership try now.
func (m *Maintainer) wakeLeadership() {
	select {
	case m.leaderWake <- struct{}{}:
	default:
	}
}

// setLeader records the outcome of a leadership attempt: term 0 means not the leader.
func (m *Maintainer) setLeader(term int64, deadline time.Time) {
	m.leader.mu.Lock()
	m.leader.term, m.leader.deadline = term, deadline
	m.leader.mu.Unlock()
	m.reportLeadership()
}

// reportLeadership emits EventDeposed and EventElected when what Term returns differs from what
// was last reported. It is called by the leadership goroutine only (and by Run once that
// goroutine has returned), so reports are in order.
func (m *Maintainer) reportLeadership() {
	now := m.Term()
	if now == m.leader.reported {
		return
	}
	if was := m.leader.reported; was != 0 {
		m.log.Info("maintenance: no longer the leader", slog.Int64("term", was))
		m.emit(Event{Kind: EventDeposed, Term: was})
	}
	m.leader.reported = now
	if now != 0 {
		m.log.Info("maintenance: elected leader", slog.Int64("term", now))
		m.emit(Event{Kind: EventElected, Term: now})
	}
}

// resign gives up the leader lease at shutdown, so another worker takes over at once.
func (m *Maintainer) resign(ctx context.Context) {
	m.leader.mu.Lock()
	term := m.leader.term // lapsed or not: resigning a lease another took over changes nothing
	m.leader.mu.Unlock()
	if term == 0 {
		return
	}
	if _, err := m.pool.Exec(ctx, `select queues.resign_leadership($1)`, m.cfg.WorkerID); err != nil {
		m.log.Warn("maintenance: resign leadership failed; another worker takes over when the lease expires",
			slog.Any("error", err))
	}
	m.setLeader(0, time.Time{})
}
