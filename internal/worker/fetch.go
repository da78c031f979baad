package worker

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/taskorch/taskorch/tasktype"
)

// The fetch loop: the one loop that decides when to claim, how many tasks, and from where. Its
// sources are its inputs:
//
//	due        queues.claim_tasks: the due tasks, woken by NOTIFY and the poll timer, claiming
//	           ahead of the free slots (buffer.go) while a backlog lasts. Without a transport it
//	           is the only source; with one, it stands in while the transport is unreachable.
//	transport  the ids the transport delivers, claimed by id (delivery.go), for free slots only.
//	limited    the tasks of limited types (docs/limits.md): asked for with queues.limit_wait, then
//	           claimed with queues.claim_limited_tasks_at_token, which waits in the database for
//	           a rate limit's token up to tokenWaitMax. With a transport it claims every limited
//	           type, as those are not sent as messages; without one it is the rate source: it
//	           starts when the due source finds a rate limit holding tasks back, and stops when
//	           none is. Its claims in flight do not count against the other sources' room, so a
//	           claim waiting for a token holds back none of the worker's other types.
//
// Every source claims through the one claim path (claim.go), and every claimed task lands in
// the claim-ahead buffer, from which the starter (buffer.go) starts it as a slot frees: the one
// place a task starts.
//
// Stopping is a signal the loop checks between claims, never the cancellation of a claim in
// flight: a claim statement can commit in the database while a cancelled client throws its
// rows away, leaving tasks leased to a worker that does not know it holds them. Claims therefore
// run on inner (which outlives ctx by the shutdown); once told to stop, the loop waits for the
// claims in flight and gives back what they returned and what the buffer holds at once
// (queues.release_tasks); the shutdown gives back anything else the database says this worker
// holds (giveBack).

// claimTimeout bounds one claim statement (a database that stopped answering). A claim cut
// short by it may have committed: its tasks are leased to this worker without its knowing, and
// wait for their lease to expire, or for this worker's shutdown to give them back.
const claimTimeout = 30 * time.Second

// maxClaimsInFlight is how many claims the due source overlaps while a backlog lasts: a second
// claim hides the first one's round trip when commits are slow.
const maxClaimsInFlight = 2

// rateClaimsInFlight is how many claims the limited source keeps in flight: each sleeps in the
// database until its token, and the first backend awake takes it (docs/limits.md), so a worker
// process, or a backend, starved of CPU for an interval or two misses no token.
const rateClaimsInFlight = 2

// sourceKind names a source of the fetch loop.
type sourceKind uint8

const (
	sourceDue sourceKind = iota
	sourceTransport
	sourceLimited
)

// source is one input of the fetch loop and the loop's state about it.
type source struct {
	kind sourceKind
	// claim claims up to n tasks (claims run on inner; a transport's receive on ctx).
	claim func(ctx, inner context.Context, n int) ([]*tasktype.Task, error)
	// ordered: the tasks of a later claim wait for those of an earlier one still in flight
	// (the buffer's gate), so that overlapping claims start in claim order.
	ordered     bool
	maxInFlight int

	active   bool // the loop claims from it now
	inFlight int  // claims (or, for limited, asks) in flight
	asked    int  // the tasks its claims in flight asked for

	// Waiting: a source that came back short, failed or must wait sleeps until its timer (or,
	// for due, a NOTIFY).
	idle  bool
	timer *time.Timer
	wait  time.Duration // due: the poll interval, backing off; transport: the retry backoff

	hinted, empty bool // due: the wait is a limit's hint; the last claim returned nothing
	slotsHeld     bool // due: the hint is that running slots hold limited tasks back
	short         bool // due: a claim came back short while another was in flight
	probed        bool // limited: queues.limit_wait said a limited task may be claimed now
	rateOnly      bool // limited, without a transport: the rate source (stops when no rate holds tasks)
	lastEmpty     bool // limited: its last claim came back empty

	// Wake-ups (due; docs/worker.md, "The loop"): an enqueue notifies only while a worker waits,
	// so the claim after which the source waits must be sent after queues.worker_waiting
	// (claimAnnounced). Claims are announced from the moment the source leaves a wait until one
	// comes back full (a backlog: it claims again without waiting); a short claim that was not
	// announced is followed at once by one that is. unsure: the last announcement saw an
	// enqueue in flight, whose task may commit unseen by the claim and unannounced: poll every
	// PollInterval until an announcement sees none.
	announce      bool
	lastAnnounced int64 // the sequence number of the latest announced claim that landed
	unsure        bool
}

// landing is what a claim (or a limit probe) of a source brought back to the loop.
type landing struct {
	src   *source
	tasks []*tasktype.Task
	err   error
	asked int
	sent  time.Time
	seq   int64 // the claim's sequence number (ordered sources); 0 otherwise

	announced bool // the claim was sent after queues.worker_waiting (due)
	clear     bool // and that call saw no enqueue in flight

	probe     bool // a limit probe (limited source), not a claim
	probeWait time.Duration
	probeDue  bool
}

// fetch claims tasks until ctx is done. Tasks run on inner, which outlives ctx by the shutdown.
func (w *Worker) fetch(ctx, inner context.Context) {
	sctx, stopStarter := context.WithCancel(ctx)
	starterDone := make(chan struct{})
	go func() { defer close(starterDone); w.runStarter(sctx, inner) }()

	f := &fetcher{w: w, ctx: ctx, inner: inner, results: make(chan landing, maxClaimsInFlight+2)}
	f.due = f.newSource(sourceDue, maxClaimsInFlight, true, func(_, inner context.Context, n int) ([]*tasktype.Task, error) {
		return w.claim(inner, claimDue, n, nil)
	})
	f.due.announce = !w.cfg.PollOnly
	f.ahead = aheadEstimator{limit: max(w.cfg.ClaimAhead, 0), slots: w.cfg.Concurrency}
	f.lim = f.newSource(sourceLimited, rateClaimsInFlight, false, func(_, inner context.Context, n int) ([]*tasktype.Task, error) {
		return w.claim(inner, claimAtToken, n, nil)
	})
	if w.dl != nil {
		// A worker on a transport claims for its free slots only, from the transport or, while
		// it is down, from PostgreSQL; and the limited types from PostgreSQL alongside.
		f.ahead.limit = 0
		f.tr = f.newSource(sourceTransport, 1, false, w.dl.receive)
		f.lim.active = true
		// The limited source before the transport: a transport asks for every free slot at each
		// receive, and would otherwise leave none to the limited types.
		f.all = []*source{f.due, f.lim, f.tr}
	} else {
		// The rate source: idle until the due source finds a rate limit holding tasks back.
		f.lim.rateOnly = true
		f.all = []*source{f.due, f.lim}
	}
	defer func() {
		stopStarter()
		<-starterDone
		left := w.ready.removeOlder(time.Time{}, true)
		for f.inFlight() > 0 {
			r := <-f.results
			r.src.inFlight--
			left = append(left, r.tasks...)
		}
		w.releaseBuffered(inner, left, "stopped before the task started")
	}()
	f.run()
}

// fetcher is the fetch loop's state.
type fetcher struct {
	w          *Worker
	ctx, inner context.Context
	results    chan landing

	due, tr, lim *source // tr: with a transport only
	all          []*source
	ahead        aheadEstimator
	seq          int64   // claims of the due source sent
	flying       []int64 // the sequence numbers of its claims in flight, oldest first
}

func (f *fetcher) newSource(kind sourceKind, maxInFlight int, ordered bool,
	claim func(ctx, inner context.Context, n int) ([]*tasktype.Task, error)) *source {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &source{kind: kind, claim: claim, ordered: ordered, maxInFlight: maxInFlight, timer: t, wait: f.w.cfg.PollInterval}
}

func (f *fetcher) inFlight() int {
	n := 0
	for _, s := range f.all {
		n += s.inFlight
	}
	return n
}

// askedFor is the tasks asked for by the claims in flight that count against s's room: the
// limited source's count for nobody, as they may wait for a token up to tokenWaitMax (the
// limited source's claims may then bring more than the room; the surplus waits in the buffer).
func (f *fetcher) askedFor(s *source) int {
	n := 0
	if s == f.lim {
		return n + f.due.asked + f.trAsked()
	}
	for _, o := range f.all {
		if o != f.lim {
			n += o.asked
		}
	}
	return n
}

// trAsked is what the transport's receives in flight asked for (0 without a transport).
func (f *fetcher) trAsked() int {
	if f.tr == nil {
		return 0
	}
	return f.tr.asked
}

// run is the loop: start the claims the sources are ready for, then wait for something to
// change.
func (f *fetcher) run() {
	w := f.w
	f.due.active = f.tr == nil
	stale := w.staleAhead.Load()
	for {
		if n := w.staleAhead.Load(); n != stale {
			stale = n
			f.ahead.reset(w.freed.Load(), w.busy.Load())
		}
		var up <-chan struct{} // closed when an unreachable transport is back
		if f.tr != nil {
			down := w.dl.health.IsDown()
			f.tr.active = !down
			if down {
				up = w.dl.health.Up()
			}
			if down && !f.due.active {
				// The transport is unreachable: claim from PostgreSQL until it is back.
				f.due.timer.Stop()
				f.due.idle, f.due.short, f.due.wait = false, false, w.cfg.PollInterval
				f.due.announce = !w.cfg.PollOnly
			}
			f.due.active = down
		}
		if w.quiet.Load() {
			f.quietDown() // claims nothing, and gives back what came in (quiet.go)
		} else {
			for _, s := range f.all {
				f.send(s)
			}
		}
		var wake, settled <-chan struct{}
		if f.due.active && f.due.idle {
			wake = w.wake
			if f.due.slotsHeld {
				settled = w.settled
			}
		}
		limTimer := f.lim.timer.C
		var trTimer <-chan time.Time
		if f.tr != nil {
			trTimer = f.tr.timer.C
		}
		select {
		case <-f.ctx.Done():
			return
		case r := <-f.results:
			if f.ctx.Err() != nil {
				r.src.inFlight--
				w.releaseBuffered(f.inner, r.tasks, "stopped before the task started")
				return
			}
			f.landed(r)
		case <-w.room:
			// A slot freed: the sources claim again if there is room.
		case <-w.quietChanged:
			// Quiet: the loop gives back its buffer above. Resumed: every source claims at once.
			f.due.timer.Stop()
			f.due.idle, f.due.wait = false, w.cfg.PollInterval
			f.due.announce = !w.cfg.PollOnly
			for _, s := range f.all[1:] {
				s.timer.Stop()
				s.idle = false
			}
		case <-up:
		case <-settled:
			// Limits' running slots held the due tasks back, and one of this worker's tasks
			// has just ended: its slot is free, claim again (claimSize decides how much).
			f.due.timer.Stop()
			f.due.idle, f.due.wait = false, w.cfg.PollInterval
			f.due.announce = !w.cfg.PollOnly
		case <-wake:
			f.due.timer.Stop()
			f.due.idle, f.due.wait = false, w.cfg.PollInterval
			f.due.announce = !w.cfg.PollOnly
		case <-f.due.timer.C:
			f.due.idle = false
			f.due.announce = !w.cfg.PollOnly
			if f.due.hinted || f.due.unsure {
				f.due.wait = w.cfg.PollInterval
			} else if f.due.empty {
				f.due.wait = min(f.due.wait*2, w.cfg.MaxPollInterval) // backing off while nothing comes
			}
		case <-trTimer:
			f.tr.idle = false
		case <-limTimer:
			f.lim.idle = false
		}
	}
}

// send starts the claims s is ready for: as many as its room allows (claimSize), up to its
// claims in flight. The limited source first asks queues.limit_wait whether a task is due.
func (f *fetcher) send(s *source) {
	w := f.w
	for s.active && !s.idle && !s.short && s.inFlight < s.maxInFlight {
		if s.kind == sourceLimited && !s.probed {
			s.inFlight++
			go func() {
				d, due, err := w.askLimitWait(f.inner, w.types)
				f.results <- landing{src: s, probe: true, probeWait: d, probeDue: due, err: err}
			}()
			return
		}
		target := 0
		if s.kind == sourceDue {
			target = f.ahead.target
		}
		want := claimSize(w.cfg.Concurrency-len(w.slots), target, w.ready.len(), f.askedFor(s), s.inFlight)
		if want == 0 {
			return
		}
		r := landing{src: s, asked: min(want, w.cfg.FetchBatch), sent: time.Now(), announced: s.kind == sourceDue && s.announce}
		if s.ordered {
			f.seq++
			r.seq = f.seq
			if len(f.flying) == 0 {
				w.ready.setGate(r.seq)
			}
			f.flying = append(f.flying, r.seq)
		}
		s.inFlight, s.asked = s.inFlight+1, s.asked+r.asked
		go func() {
			if r.announced {
				r.tasks, r.clear, r.err = w.claimAnnounced(f.inner, claimDue, r.asked)
			} else {
				r.tasks, r.err = s.claim(f.ctx, f.inner, r.asked)
			}
			f.results <- r
		}()
	}
}

// landed takes what a claim brought back: its tasks go to the buffer, and the source decides
// when to claim again.
func (f *fetcher) landed(r landing) {
	w, s := f.w, r.src
	s.inFlight, s.asked = s.inFlight-1, s.asked-r.asked
	if r.probe {
		f.probeLanded(r)
		return
	}
	if s.ordered {
		f.flying = slices.DeleteFunc(f.flying, func(seq int64) bool { return seq == r.seq })
	}
	w.ready.add(r.tasks, r.sent, r.seq)
	if s.ordered {
		if len(f.flying) == 0 {
			w.ready.setGate(math.MaxInt64)
		} else {
			w.ready.setGate(f.flying[0])
		}
	}
	switch s.kind {
	case sourceDue:
		f.dueLanded(r)
	case sourceTransport:
		if r.err == nil {
			s.wait = w.cfg.PollInterval
			return
		}
		w.log.Warn("claiming received tasks failed; retrying", "error", r.err, "retry_in", s.wait)
		s.idle = true
		s.timer.Reset(s.wait)
		s.wait = min(s.wait*2, w.cfg.MaxPollInterval)
	case sourceLimited:
		// After tasks, claim again at once: the claim waits for the next token in the database
		// (or comes back at once when it is further than tokenWaitMax). Otherwise ask first.
		s.lastEmpty = len(r.tasks) == 0
		if r.err != nil || s.lastEmpty {
			s.probed = false
		}
		if r.err != nil {
			w.log.Warn("claiming limited tasks failed; retrying", "error", r.err, "retry_in", w.cfg.MaxPollInterval)
			f.sleep(s, w.cfg.MaxPollInterval)
		}
	}
}

// dueLanded: while claims come back full the due source claims again at once; a claim that
// comes back short means the backlog is gone, and the source waits for a NOTIFY or the poll
// timer (which backs off), or as long as a limit holding tasks back says. The claim before a
// wait is an announced one (the source's announce).
func (f *fetcher) dueLanded(r landing) {
	w, s := f.w, f.due
	f.ahead.observe(time.Since(r.sent), w.freed.Load(), w.busy.Load())
	if r.announced && r.err == nil && r.seq > s.lastAnnounced {
		s.lastAnnounced, s.unsure = r.seq, !r.clear
	}
	switch {
	case r.err != nil:
		w.log.Warn("claim failed; retrying", "error", r.err, "retry_in", s.wait)
		s.short = true
	case len(r.tasks) < r.asked:
		s.short = true
	default:
		s.wait = w.cfg.PollInterval
		s.announce = false // a backlog: the source claims again without waiting
	}
	if !s.short || s.inFlight > 0 {
		return // there may be more; or the backlog is gone, and the other claim returns first
	}
	s.short = false
	if r.err == nil && !w.cfg.PollOnly && s.lastAnnounced != f.seq {
		// The backlog is gone, but the latest claim was not announced: an enqueue committing
		// after it would not wake this worker. Announce, and claim again.
		s.announce = true
		return
	}
	d := s.wait
	s.hinted, s.slotsHeld, s.empty = false, false, len(r.tasks) == 0
	if r.err == nil {
		if hint, slots, ok := w.limitWait(f.inner, w.types); ok {
			if !slots && f.lim.rateOnly {
				// A rate limit holds tasks back: the rate source claims them, at their tokens;
				// this source waits as it would without it.
				f.startRate()
			} else {
				// With slots, an end of one of this worker's tasks wakes the source (run): one
				// that came during this claim is kept, as the claim may have missed its slot.
				d, s.hinted, s.slotsHeld = hint, true, slots
			}
		}
	}
	if s.unsure {
		d = min(d, w.cfg.PollInterval)
	}
	// Idle (or the database is unreachable): wait for a NOTIFY or the poll timer.
	s.idle = true
	s.timer.Reset(d)
}

// probeLanded: the limited source claims when queues.limit_wait says a limited task may be
// claimed: under a rate limit, once its token is near (rateProbed), else at once; while none is
// due it asks once per MaxPollInterval. The rate source (without a transport) stops instead when
// none is due or only running slots hold them back: the due source serves those.
func (f *fetcher) probeLanded(r landing) {
	w, s := f.w, r.src
	switch {
	case s.rateOnly && (r.err != nil || !r.probeDue || r.probeWait == 0):
		s.active, s.probed, s.lastEmpty = false, false, false
	case r.err != nil || !r.probeDue:
		f.sleep(s, w.cfg.MaxPollInterval)
	case r.probeWait > 0:
		s.probed = true
		if d := rateProbed(r.probeWait, s.lastEmpty); d > 0 {
			f.sleep(s, d)
		}
	default:
		// Running slots hold them back (with a transport): claim at once, or after PollInterval
		// when the last claim came back empty, so as not to spin on a slot nobody frees.
		s.probed = true
		if s.lastEmpty {
			f.sleep(s, w.cfg.PollInterval)
		}
	}
}

// startRate starts the rate source, unless it runs already.
func (f *fetcher) startRate() {
	s := f.lim
	if s.active {
		return
	}
	s.timer.Stop()
	s.active, s.idle, s.probed, s.lastEmpty = true, false, false, false
}

// sleep makes s wait d before it claims (or asks) again.
func (f *fetcher) sleep(s *source, d time.Duration) {
	s.idle = true
	s.timer.Reset(d)
}

// claimSize is how many tasks the fetcher claims now (0: none yet), given the free slots, the
// claim-ahead target, the tasks buffered and those asked for by the claims in flight (inFlight of
// them by this source). The room is the free slots plus the target; a claim asks for what is
// missing of it, and goes out only once half the room or more is missing: a claim costs a round
// trip and a fixed cost in the server, which small claims pay for few tasks. The exception is a
// free slot that nothing buffered or asked for would fill, with no claim of this source in
// flight: it claims at once, whatever the size (the first claim after an idle spell).
func claimSize(free, target, buffered, asked, inFlight int) int {
	room := free + target
	want := room - buffered - asked
	if want <= 0 {
		return 0
	}
	starving := inFlight == 0 && buffered+asked < free
	if !starving && 2*want < room {
		return 0
	}
	return want
}
