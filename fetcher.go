package taskorch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// claimTimeout bounds one claim statement (a database that stopped answering). A claim cut
// short by it may have committed: its tasks are leased to this worker without its knowing, and
// wait for their lease to expire, or for this worker's shutdown to give them back.
const claimTimeout = 30 * time.Second

const claimSQL = `select ` + taskColumns + ` from queues.claim_tasks($1, $2, $3::interval, $4)`

// claimLimitedSQL claims tasks of limited types only (docs/limits.md): a worker on a transport
// claims these from the database, as they are not sent as messages.
const claimLimitedSQL = `select ` + taskColumns + ` from queues.claim_limited_tasks($1, $2, $3::interval, $4)`

// runFetcher claims tasks from PostgreSQL until ctx is done or until is closed (nil: never;
// with a transport, when it is back after an outage). Tasks run on inner, which outlives ctx by
// the shutdown.
//
// It claims continuously while a backlog lasts: one claim in flight at a time, for the free
// slots plus the claim-ahead target (claim_ahead.go), into the buffer that runStarter starts
// tasks from as slots free. A claim that comes back short means the backlog is gone: the
// fetcher then waits for a NOTIFY or the poll timer, which backs off.
//
// Stopping is a signal the loop checks between claims, never the cancellation of a claim in
// flight: a claim statement can commit in the database while a cancelled client throws its
// rows away, leaving tasks leased to a worker that does not know it holds them. A claim
// therefore runs on inner; once the worker is told to stop, the fetcher waits for the claim in
// flight and gives back what it returned and what the buffer holds at once (release_tasks);
// the shutdown gives back anything else the database says this worker holds (giveBack).
func (w *Worker) runFetcher(ctx, inner context.Context, until <-chan struct{}) {
	var types []string
	if !w.cfg.ClaimUnknownTypes {
		types = knownTypes(w.cfg)
	}
	lease := w.cfg.LeaseDuration.String()
	sctx, stopStarter := context.WithCancel(ctx)
	starterDone := make(chan struct{})
	go func() { defer close(starterDone); w.runStarter(sctx, inner) }()

	type claimResult struct {
		tasks     []*Task
		err       error
		asked     int
		sent      time.Time
		seq       int64
		announced bool // the claim was sent after queues.worker_waiting
		clear     bool // and that call saw no enqueue in flight
	}
	results := make(chan claimResult, maxClaimsInFlight)
	inFlight, asked := 0, 0 // claims in flight, and the tasks they asked for
	var seq int64           // claims sent
	var flying []int64      // the sequence numbers of the claims in flight, oldest first
	landed := func(r claimResult) {
		flying = slices.DeleteFunc(flying, func(s int64) bool { return s == r.seq })
		w.ready.add(r.tasks, r.sent, r.seq)
		if len(flying) == 0 {
			w.ready.setGate(math.MaxInt64)
		} else {
			w.ready.setGate(flying[0])
		}
	}
	defer func() {
		if ctx.Err() == nil {
			// Back to the transport (until closed): start what was claimed, as slots free.
			for ; inFlight > 0; inFlight-- {
				landed(<-results)
			}
			tick := time.NewTicker(10 * time.Millisecond)
			for w.ready.len() > 0 && ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-w.room:
				case <-tick.C:
				}
			}
			tick.Stop()
		}
		stopStarter()
		<-starterDone
		left := w.ready.removeOlder(time.Time{}, true)
		for ; inFlight > 0; inFlight-- {
			left = append(left, (<-results).tasks...)
		}
		w.releaseBuffered(inner, left, "stopped before the task started")
	}()

	// Claim ahead with PostgreSQL delivery only: a worker on a transport that is down claims
	// for its free slots, and goes back to the transport without a buffer to empty.
	ahead := aheadEstimator{limit: max(w.cfg.ClaimAhead, 0), slots: w.cfg.Concurrency}
	if until != nil {
		ahead.limit = 0
	}
	wait := w.cfg.PollInterval
	idle := false  // the last claim came back short (or failed): wait for a wake-up or the timer
	short := false // a claim came back short while another was in flight: claim no more for now
	hinted, empty := false, false
	// Wake-ups (docs/worker.md, "The loop"): an enqueue notifies only while a worker waits, so
	// the claim after which the fetcher waits must be sent after queues.worker_waiting. Claims
	// are announced from the moment the fetcher leaves a wait until one comes back full (a
	// backlog: it will claim again without waiting); a short claim that was not announced is
	// followed at once by one that is. unsure: the last announcement saw an enqueue in flight,
	// whose task may commit unseen by the claim and unannounced: poll every PollInterval until an
	// announcement sees none.
	announce := !w.cfg.PollOnly
	var lastAnnounced int64 // the sequence number of the latest announced claim that landed
	unsure := false
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var wake <-chan struct{}
	var timerC <-chan time.Time
	stale := w.staleAhead.Load()
	for {
		if n := w.staleAhead.Load(); n != stale {
			stale = n
			ahead.reset(w.freed.Load(), w.busy.Load())
		}
		for inFlight < maxClaimsInFlight && !idle && !short {
			want := claimSize(w.cfg.Concurrency-len(w.slots), ahead.target, w.ready.len(), asked, inFlight)
			if want == 0 {
				break
			}
			seq++
			r := claimResult{asked: min(want, w.cfg.FetchBatch), sent: time.Now(), seq: seq, announced: announce}
			inFlight, asked = inFlight+1, asked+r.asked
			if len(flying) == 0 {
				w.ready.setGate(seq)
			}
			flying = append(flying, seq)
			go func() {
				if r.announced {
					r.tasks, r.clear, r.err = w.claimAnnounced(inner, r.asked, lease, types)
				} else {
					r.tasks, r.err = w.claim(inner, claimSQL, r.asked, lease, types)
				}
				results <- r
			}()
		}
		wake, timerC = nil, nil
		if idle {
			wake, timerC = w.wake, timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-until:
			return
		case r := <-results:
			inFlight, asked = inFlight-1, asked-r.asked
			if ctx.Err() != nil {
				w.releaseBuffered(inner, r.tasks, "stopped before the task started")
				return
			}
			landed(r)
			ahead.observe(time.Since(r.sent), w.freed.Load(), w.busy.Load())
			if r.announced && r.err == nil && r.seq > lastAnnounced {
				lastAnnounced, unsure = r.seq, !r.clear
			}
			switch {
			case r.err != nil:
				w.log.Warn("claim failed; retrying", "error", r.err, "retry_in", wait)
				short = true
			case len(r.tasks) < r.asked:
				short = true
			default:
				wait = w.cfg.PollInterval
				announce = false // a backlog: the fetcher claims again without waiting
			}
			if !short || inFlight > 0 {
				continue // there may be more; or the backlog is gone, and the other claim returns first
			}
			short = false
			if r.err == nil && !w.cfg.PollOnly && lastAnnounced != seq {
				// The backlog is gone, but the latest claim was not announced: an enqueue
				// committing after it would not wake this worker. Announce, and claim again.
				announce = true
				continue
			}
			// A short claim may be a limit holding tasks back: then wait as long as it says.
			d := wait
			hinted, empty = false, len(r.tasks) == 0
			if r.err == nil {
				if hint, ok := w.limitWait(inner, types); ok {
					d, hinted = hint, true
				}
			}
			if unsure {
				d = min(d, w.cfg.PollInterval)
			}
			// Idle (or the database is unreachable): wait for a NOTIFY or the poll timer.
			idle = true
			timer.Reset(d)
		case <-w.room:
			// A slot freed: the loop claims again if there is room and no claim is in flight.
		case <-wake:
			timer.Stop()
			idle, wait = false, w.cfg.PollInterval
			announce = !w.cfg.PollOnly
		case <-timerC:
			idle = false
			announce = !w.cfg.PollOnly
			if hinted || unsure {
				wait = w.cfg.PollInterval
			} else if empty {
				wait = min(wait*2, w.cfg.MaxPollInterval) // backing off while nothing comes
			}
		}
	}
}

// claimSize is how many tasks the fetcher claims now (0: none yet), given the free slots, the
// claim-ahead target, the tasks buffered and those asked for by the inFlight claims in flight.
// The room is the free slots plus the target; a claim asks for what is missing of it, and goes
// out only once half the room or more is missing: a claim costs a round trip and a fixed cost
// in the server, which small claims pay for few tasks. The exception is a free slot
// that nothing buffered or asked for would fill, with no claim in flight: it claims at once,
// whatever the size (the first claim after an idle spell).
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

// maxClaimsInFlight is how many claims the fetcher overlaps while a backlog lasts: a second
// claim hides the first one's round trip when commits are slow.
const maxClaimsInFlight = 2

// claimAndStart claims up to n tasks with claimSQL on inner and starts them; the n slots were
// taken, and those not filled are given back. What a claim returns after ctx is done is not
// started: the shutdown gives it back.
func (w *Worker) claimAndStart(ctx, inner context.Context, claimSQL string, n int, lease string, types []string) ([]*Task, error) {
	tasks, err := w.claim(inner, claimSQL, n, lease, types)
	if ctx.Err() != nil {
		tasks = nil
	}
	for range n - len(tasks) {
		<-w.slots
	}
	for _, t := range tasks {
		w.start(inner, t)
	}
	return tasks, err
}

// runLimitedFetcher claims the tasks of limited types, which a transport does not deliver
// (docs/limits.md), until ctx is done. It asks queues.limit_wait first and takes slots only
// when a limited task is due: while none is, it asks once per MaxPollInterval; while limits hold
// tasks back, it waits as the answer says.
func (w *Worker) runLimitedFetcher(ctx, inner context.Context) {
	var types []string
	if !w.cfg.ClaimUnknownTypes {
		types = knownTypes(w.cfg)
	}
	lease := w.cfg.LeaseDuration.String()
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		d, due, err := w.askLimitWait(inner, types)
		switch {
		case err != nil || !due:
			if !sleep(w.cfg.MaxPollInterval) {
				return
			}
			continue
		case d > 0 && !sleep(d):
			return
		}
		n := w.takeSlots(ctx, nil)
		if n == 0 {
			return
		}
		tasks, err := w.claimAndStart(ctx, inner, claimLimitedSQL, n, lease, types)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("claiming limited tasks failed; retrying", "error", err, "retry_in", w.cfg.MaxPollInterval)
			if !sleep(w.cfg.MaxPollInterval) {
				return
			}
		} else if len(tasks) == 0 && !sleep(w.cfg.PollInterval) {
			return
		}
	}
}

// takeSlots waits for one free task slot, then takes as many more as are free now, up to a
// fetch batch, and returns how many it took: 0 when ctx is done or until is closed first (nil:
// never). The caller gives back the slots it does not fill.
func (w *Worker) takeSlots(ctx context.Context, until <-chan struct{}) int {
	select {
	case <-ctx.Done():
		return 0
	case <-until:
		return 0
	case w.slots <- struct{}{}:
	}
	n := 1
	for n < w.cfg.FetchBatch {
		select {
		case w.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// workerWaitingSQL tells the database this worker is about to wait for NOTIFY taskorch_task
// (docs/worker.md, "The loop"): the next enqueue notifies. It answers false when an enqueue that
// began before it is still in flight.
const workerWaitingSQL = `select queues.worker_waiting()`

// announceWaiting calls queues.worker_waiting before a claim after which the fetcher may wait:
// clear is false when an enqueue was in flight, whose task may commit after the claim without
// a notification.
func (w *Worker) announceWaiting(ctx context.Context) (clear bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	err = w.pool.QueryRow(ctx, workerWaitingSQL).Scan(&clear)
	return clear, err
}

// claimAnnounced calls queues.worker_waiting and then claims up to n tasks, in one round trip
// (a batch: the claim's snapshot is taken after the announcement). clear is worker_waiting's
// answer. ctx as for claim.
func (w *Worker) claimAnnounced(ctx context.Context, n int, lease string, types []string) (tasks []*Task, clear bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(workerWaitingSQL)
	b.Queue(claimSQL, w.cfg.ID, n, lease, types)
	br := w.pool.SendBatch(ctx, b)
	defer func() { err = errors.Join(err, br.Close()) }()
	if err := br.QueryRow().Scan(&clear); err != nil {
		return nil, false, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, err
	}
	tasks, err = w.collectClaimed(ctx, rows)
	return tasks, clear, err
}

// claim claims up to n tasks. ctx must not be the one whose end stops the worker (see
// runFetcher); the claim is bounded by claimTimeout instead.
func (w *Worker) claim(ctx context.Context, claimSQL string, n int, lease string, types []string) ([]*Task, error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	rows, err := w.pool.Query(ctx, claimSQL, w.cfg.ID, n, lease, types)
	if err != nil {
		return nil, err
	}
	return w.collectClaimed(ctx, rows)
}

// runListener holds a LISTEN connection (taskorch_task and taskorch_cancel) and turns
// notifications into wake-ups and lease checks, reconnecting with backoff when the connection
// drops. Polling covers the gaps; after a reconnect the running tasks' leases are checked once.
// first, when not nil, is a connection already listening (Run opened and checked it).
func (w *Worker) runListener(ctx context.Context, first *pgx.Conn) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		pc := first
		first = nil
		var err error
		if pc == nil {
			pc, err = w.openListen(ctx)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			w.listening.Store(true)
			w.signalWake()       // anything enqueued while we were not listening
			w.signalLeaseCheck() // anything cancelled while we were not listening
			err = w.listen(ctx, pc)
			w.listening.Store(false)
		}
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("LISTEN connection lost; polling until it is back", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// openListen opens the LISTEN connection: a connection of the pool taken out of it for good
// (it keeps session state), or with ListenConfig a direct connection, checked with a probe.
func (w *Worker) openListen(ctx context.Context) (*pgx.Conn, error) {
	var pc *pgx.Conn
	if w.cfg.ListenConfig != nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := pgx.ConnectConfig(cctx, w.cfg.ListenConfig)
		if err != nil {
			return nil, fmt.Errorf("connect for LISTEN: %w", err)
		}
		pc = c
	} else {
		conn, err := w.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		pc = conn.Hijack()
	}
	for _, sql := range []string{"listen taskorch_task", "listen " + cancelChannel} {
		if _, err := pc.Exec(ctx, sql); err != nil {
			_ = pc.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	if w.cfg.ListenConfig != nil {
		if err := w.probeListen(ctx, pc); err != nil {
			_ = pc.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return pc, nil
}

// listenProbeTimeout bounds the wait for the probe's NOTIFY on a direct LISTEN connection.
const listenProbeTimeout = 5 * time.Second

// probeListen checks that a NOTIFY sent through the pool reaches pc: it does not when pc goes
// through a transaction-pooling proxy (its server connection changes between transactions) or
// to another server than the pool's.
func (w *Worker) probeListen(ctx context.Context, pc *pgx.Conn) error {
	if _, err := pc.Exec(ctx, "listen taskorch_listen_probe"); err != nil {
		return err
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := w.cfg.ID + "/" + hex.EncodeToString(b)
	if _, err := w.pool.Exec(ctx, "select pg_notify('taskorch_listen_probe', $1)", token); err != nil {
		return fmt.Errorf("send the LISTEN probe: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, listenProbeTimeout)
	defer cancel()
	for {
		n, err := pc.WaitForNotification(pctx)
		if err != nil {
			if ctx.Err() == nil && pctx.Err() != nil {
				return fmt.Errorf("%w: a NOTIFY sent through the pool did not arrive on the LISTEN connection within %s: "+
					"it must reach the same PostgreSQL directly, not through a transaction-pooling proxy", ErrListenProbe, listenProbeTimeout)
			}
			return err
		}
		if n.Channel == "taskorch_listen_probe" && n.Payload == token {
			break
		}
		if n.Channel != "taskorch_listen_probe" {
			w.notified(n)
		}
	}
	_, err := pc.Exec(ctx, "unlisten taskorch_listen_probe")
	return err
}

// listen turns notifications on pc into wake-ups and lease checks until pc fails or ctx is
// done; it closes pc.
func (w *Worker) listen(ctx context.Context, pc *pgx.Conn) error {
	defer func() { _ = pc.Close(context.WithoutCancel(ctx)) }()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		w.notified(n)
	}
}

// notified handles one notification: new tasks (taskorch_task) wake the fetcher; a cancelled
// task (taskorch_cancel) may stop one of the running ones (lease_check.go).
func (w *Worker) notified(n *pgconn.Notification) {
	if n.Channel == cancelChannel {
		w.cancelNotified(n.Payload)
		return
	}
	w.metrics.notified()
	w.signalWake()
}

func (w *Worker) signalWake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
	if w.dl != nil {
		w.dl.disp.Wake() // with a transport, new tasks are the dispatcher's to send
	}
}

// knownTypes lists the task types a worker with this configuration can run, sorted: db_function,
// its Go handlers' types and the channels it has a provider for. It claims only these, and
// records them in queues.worker, unless ClaimUnknownTypes is set.
func knownTypes(c WorkerConfig) []string {
	types := append(append([]string{TypeDBFunction}, c.Handlers.Types()...), channelTypesOf(c.Channels)...)
	slices.Sort(types)
	return slices.Compact(types)
}

// limitWaitSQL asks how long until a task a limit holds back may be claimed (docs/limits.md).
const limitWaitSQL = `select queues.limit_wait($1)`

// limitWait is how long the fetcher should wait after a short claim when limits hold tasks back:
// until the next token of a rate limit, or PollInterval when running slots hold them (a slot
// frees when a task finishes, anywhere). ok is false when no task is held back; the answer is
// then kept for a second, so an idle worker without limits asks once a second at most.
func (w *Worker) limitWait(ctx context.Context, types []string) (time.Duration, bool) {
	if time.Now().UnixNano() < w.noLimitWaitUntil.Load() {
		return 0, false
	}
	d, due, err := w.askLimitWait(ctx, types)
	if err != nil || !due {
		w.noLimitWaitUntil.Store(time.Now().Add(time.Second).UnixNano())
		return 0, false
	}
	if d == 0 {
		return w.cfg.PollInterval, true
	}
	return d, true
}

// askLimitWait asks queues.limit_wait: due is false when no task of a limited type is due; d is
// how long until one may be claimed, 0 when running slots hold them (or one may be claimed now).
func (w *Worker) askLimitWait(ctx context.Context, types []string) (d time.Duration, due bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	asked := time.Now()
	var secs *float64
	if err := w.pool.QueryRow(ctx, limitWaitSQL, types).Scan(&secs); err != nil || secs == nil {
		return 0, false, err
	}
	if *secs <= 0 {
		return 0, true, nil
	}
	// The answer is as old as the round trip that brought it, and the next claim takes about as
	// long to reach the bucket: aim that much earlier. A claim that comes a little early finds
	// no token and asks again; one that comes late loses the time, as a bucket holds no more
	// than its burst.
	d = time.Duration(*secs*float64(time.Second)) - 2*time.Since(asked)
	return min(max(d, time.Millisecond), w.cfg.MaxPollInterval), true, nil
}
