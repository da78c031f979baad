package worker

import (
	"context"
	"time"
)

// How long to wait when limits hold tasks back (docs/limits.md): queues.limit_wait says.

// limitWaitSQL asks how long until a task a limit holds back may be claimed (docs/limits.md).
const limitWaitSQL = `select queues.limit_wait($1)`

// tokenWaitMax bounds how long a claim of the rate source (claimAtToken) waits in the database
// for a token: several intervals of a rate of 20 a second, so that the claims of every worker
// are asleep for each token and the first awake takes it; short enough that the snapshot it
// holds meanwhile does not hold vacuum back. tokenWaitMaxSQL is the same, as the claim passes it.
const (
	tokenWaitMax    = 250 * time.Millisecond
	tokenWaitMaxSQL = "250 milliseconds"
)

// limitWait is how long the fetcher should wait after a short claim when limits hold tasks back:
// until the next token of a rate limit, or PollInterval when running slots hold them (slots is
// then true: a slot frees when a task finishes, anywhere, and the fetcher also claims again as
// soon as one of this worker's own outcomes commits). ok is false when no task is held back; the
// answer is then kept for a second, so an idle worker without limits asks once a second at most.
func (w *Worker) limitWait(ctx context.Context, types []string) (d time.Duration, slots, ok bool) {
	if time.Now().UnixNano() < w.noLimitWaitUntil.Load() {
		return 0, false, false
	}
	d, due, err := w.askLimitWait(ctx, types)
	if err != nil || !due {
		w.noLimitWaitUntil.Store(time.Now().Add(time.Second).UnixNano())
		return 0, false, false
	}
	if d == 0 {
		return w.cfg.PollInterval, true, true
	}
	return d, false, true
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
	// no token and asks again (or, from the rate source, waits for it in the database); one that
	// comes late loses the time, as a bucket holds no more than its burst.
	d = time.Duration(*secs*float64(time.Second)) - 2*time.Since(asked)
	return min(max(d, time.Millisecond), w.cfg.MaxPollInterval), true, nil
}

// rateProbed decides what the rate source (the limited source) does with queues.limit_wait's
// answer d (> 0: a rate limit holds a due task; its token comes in about d): sleep until
// tokenWaitMax/2 before the token when it comes later than tokenWaitMax, else claim at once, as
// the claim then waits for the token in the database. After a claim that came back empty with
// the token near (one that was there and that the claim could not take: running slots, tasks
// another claim holds; or a line of claims longer than tokenWaitMax) it sleeps all of d, so that
// it does not spin on a token it cannot take.
func rateProbed(d time.Duration, lastEmpty bool) (sleep time.Duration) {
	switch {
	case d > tokenWaitMax:
		return d - tokenWaitMax/2
	case lastEmpty:
		return d
	default:
		return 0
	}
}
