package taskorch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// waitRecheck is how often Wait reads a task's status again while it waits: the safety net
// against a lost notification (a dropped LISTEN connection, a crash that forgot the waiters, a
// pool behind a transaction pooler, which cannot LISTEN).
const waitRecheck = 3 * time.Second

// waitLinger is how long the LISTEN connection stays open after the last Wait returned, so that
// Waits one after another do not each open a connection.
const waitLinger = 30 * time.Second

// Wait returns the task once it has reached a terminal status — completed, failed, dead or
// cancelled — with its result (Task.Result) when it completed with one. A task that is terminal
// already is returned at once; a task that does not exist returns an error matching ErrNotFound
// at once. When ctx ends first, Wait returns ctx's error.
//
// Wait does not poll: the client holds one LISTEN connection, taken from its pool for as long as
// any Wait is waiting, and a task's terminal transition notifies it in the transaction that
// makes it (queues.watch_task registers the waiter; docs/sql.md, "Results and waiting"). Only
// waited-for tasks notify, so workers pay nothing when nobody waits. Every 3 seconds Wait reads
// the status again, in case a notification was lost. A retried task (Retry) is waited for again.
//
// Close ends a Wait in progress: it returns an error matching ErrClientClosed.
func (c *Client) Wait(ctx context.Context, id int64) (*Task, error) {
	if err := c.checkOpen(); err != nil {
		return nil, fmt.Errorf("wait for task %d: %w", id, err)
	}
	w, err := c.waits.add(ctx, id) // listening before the status is read: no transition falls between
	if err != nil {
		return nil, fmt.Errorf("wait for task %d: %w", id, err)
	}
	defer c.waits.remove(w)
	every := c.waits.recheck
	if every <= 0 {
		every = waitRecheck
	}
	recheck := time.NewTimer(every)
	defer recheck.Stop()
	for {
		status, err := c.watchTask(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("wait for task %d: %w", id, err)
		}
		if !status.Finished() {
			recheck.Reset(every)
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("wait for task %d: %w", id, ctx.Err())
			case <-c.waits.closing:
				return nil, fmt.Errorf("wait for task %d: %w", id, ErrClientClosed)
			case <-recheck.C:
				continue // look again, in case a notification was lost
			case t := <-w.ch:
				if t != nil && t.Status.Finished() {
					return t, nil // read by the listener, with the other tasks of its notification
				}
				// Told to look again (a reconnection), or the listener's read failed: read it.
			}
		}
		t, err := c.get(ctx, c.pool, id)
		if err != nil {
			return nil, fmt.Errorf("wait for task %d: %w", id, waitError(ctx, err))
		}
		if t.Status.Finished() {
			return t, nil
		}
		// Retried since, or notified of an earlier run: watch again.
	}
}

// watchTask registers a waiter for task id (queues.watch_task) and returns its status; an error
// matching ErrNotFound when there is no such task.
func (c *Client) watchTask(ctx context.Context, id int64) (Status, error) {
	var status *string
	if err := c.pool.QueryRow(ctx, `select queues.watch_task($1)`, id).Scan(&status); err != nil {
		return "", waitError(ctx, err)
	}
	if status == nil {
		return "", ErrNotFound
	}
	return Status(*status), nil
}

// waitError is err, or ctx's error when ctx ended (a cancelled query says less).
func waitError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return mapError(err)
}

// waitHub is a client's LISTEN taskorch_task_done connection, shared by its waiters: it runs while
// at least one Wait is waiting, and hands each notified task id to that task's waiters.
type waitHub struct {
	pool    *pgxpool.Pool
	recheck time.Duration // 0: waitRecheck (tests set it)
	linger  time.Duration // waitLinger (tests set it)

	// closing is closed by close (Client.Close): the Waits in progress return, and no listener
	// starts again. running counts the listeners' goroutines, which close waits for.
	closing chan struct{}
	running sync.WaitGroup

	mu     sync.Mutex
	l      *waitListener // nil when nobody waits
	closed bool
}

// newWaitHub returns the hub of a client over pool.
func newWaitHub(pool *pgxpool.Pool) *waitHub {
	return &waitHub{pool: pool, linger: waitLinger, closing: make(chan struct{})}
}

// close stops the listener, if one runs, and waits until every listener's goroutine has ended
// and closed its connection; the hub refuses new waiters from then on (ErrClientClosed).
func (h *waitHub) close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.closing)
		if l := h.l; l != nil {
			if l.idle != nil {
				l.idle.Stop()
				l.idle = nil
			}
			h.stop(l)
		}
	}
	h.mu.Unlock()
	h.running.Wait()
}

// waitListener is one run of the hub's listener, from the first waiter to the last.
type waitListener struct {
	ready   chan struct{} // closed once LISTEN is active, or err is set
	err     error         // the first connection failed
	cancel  context.CancelFunc
	waiters map[int64]map[*waiter]struct{}
	n       int
	idle    *time.Timer // set while n is 0: stops the listener when it fires
}

// waiter is one Wait's registration: ch receives its task, read once it finished, or nil when
// the task may have finished and Wait should read it.
type waiter struct {
	id int64
	ch chan *Task
	l  *waitListener
}

// add registers a waiter for id, starting the listener if it is not running, and returns once
// the listener is listening.
func (h *waitHub) add(ctx context.Context, id int64) (*waiter, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClientClosed
	}
	l := h.l
	if l == nil {
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		l = &waitListener{ready: make(chan struct{}), cancel: cancel, waiters: map[int64]map[*waiter]struct{}{}}
		h.l = l
		h.running.Add(1)
		go func() {
			defer h.running.Done()
			h.run(lctx, l)
		}()
	}
	if l.idle != nil {
		l.idle.Stop() // if it fired already, it finds n above 0 and does nothing
		l.idle = nil
	}
	w := &waiter{id: id, ch: make(chan *Task, 1), l: l}
	if l.waiters[id] == nil {
		l.waiters[id] = map[*waiter]struct{}{}
	}
	l.waiters[id][w] = struct{}{}
	l.n++
	h.mu.Unlock()
	select {
	case <-l.ready:
		if l.err != nil {
			h.remove(w)
			return nil, l.err
		}
		return w, nil
	case <-ctx.Done():
		h.remove(w)
		return nil, ctx.Err()
	case <-h.closing:
		h.remove(w)
		return nil, ErrClientClosed
	}
}

// remove forgets w. After the last waiter, the listener lingers (waitLinger), then stops and
// closes its connection, unless another Wait came meanwhile.
func (h *waitHub) remove(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := w.l
	delete(l.waiters[w.id], w)
	if len(l.waiters[w.id]) == 0 {
		delete(l.waiters, w.id)
	}
	l.n--
	if l.n > 0 {
		return
	}
	if h.linger <= 0 || l.err != nil || h.l != l {
		h.stop(l)
		return
	}
	l.idle = time.AfterFunc(h.linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if l.n == 0 {
			h.stop(l)
		}
	})
}

// stop ends l's listener; h.mu is held.
func (h *waitHub) stop(l *waitListener) {
	l.cancel()
	if h.l == l {
		h.l = nil
	}
}

// run holds the LISTEN connection until l is cancelled, reconnecting with backoff when it drops;
// after a reconnection every waiter looks again (what was notified meanwhile is lost). When the
// first connection fails, the waiters get the error.
func (h *waitHub) run(ctx context.Context, l *waitListener) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		pc, err := h.open(ctx)
		if err != nil && first {
			h.mu.Lock()
			l.err = fmt.Errorf("listen for task notifications: %w", err)
			if h.l == l {
				h.l = nil // the next Wait tries again
			}
			h.mu.Unlock()
			close(l.ready)
			return
		}
		if err == nil {
			if first {
				close(l.ready)
				first = false
			} else {
				backoff = 100 * time.Millisecond
				h.signal(l, nil)
			}
			h.listen(ctx, pc, l)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// open takes a connection out of the pool for good (it keeps session state) and listens on it.
func (h *waitHub) open(ctx context.Context) (*pgx.Conn, error) {
	conn, err := h.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	pc := conn.Hijack()
	if _, err := pc.Exec(ctx, "listen taskorch_task_done"); err != nil {
		_ = pc.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return pc, nil
}

// listen hands notifications on pc to the waiters until pc fails or ctx is done; it closes pc.
func (h *waitHub) listen(ctx context.Context, pc *pgx.Conn, l *waitListener) {
	defer func() { _ = pc.Close(context.WithoutCancel(ctx)) }()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				h.signal(l, nil) // look again: notifications may be lost until the reconnection
			}
			return
		}
		ids := make([]int64, 0, strings.Count(n.Payload, ",")+1)
		for f := range strings.SplitSeq(n.Payload, ",") {
			if id, err := strconv.ParseInt(f, 10, 64); err == nil {
				ids = append(ids, id)
			}
		}
		h.deliver(ctx, pc, l, ids)
	}
}

// deliver reads the tasks of one notification that have waiters, in one query on the listening
// connection (so 1,000 Waits woken at once do not queue for 1,000 reads on the pool), and hands
// each finished one to its waiters. When the read fails, the waiters read their tasks themselves.
func (h *waitHub) deliver(ctx context.Context, pc *pgx.Conn, l *waitListener, ids []int64) {
	h.mu.Lock()
	wanted := ids[:0:0]
	for _, id := range ids {
		if len(l.waiters[id]) > 0 {
			wanted = append(wanted, id)
		}
	}
	h.mu.Unlock()
	if len(wanted) == 0 {
		return
	}
	tasks, err := readTasks(ctx, pc, wanted)
	if err != nil {
		h.signal(l, wanted)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range wanted {
		for w := range l.waiters[id] {
			select {
			case w.ch <- tasks[id]: // nil (not found): the waiter reads it and says so
			default:
			}
		}
	}
}

// readTasks reads the tasks ids, with their results, by id.
func readTasks(ctx context.Context, db DBTX, ids []int64) (map[int64]*Task, error) {
	rows, err := db.Query(ctx, `select `+taskWithResultColumns+` from queues.task where task_id = any($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	tasks := make(map[int64]*Task, len(ids))
	for rows.Next() {
		t, err := scanTaskWithResult(rows)
		if err != nil {
			return nil, err
		}
		tasks[t.ID] = t
	}
	return tasks, rows.Err()
}

// signal wakes the waiters of ids, or every waiter when ids is nil.
func (h *waitHub) signal(l *waitListener, ids []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wake := func(ws map[*waiter]struct{}) {
		for w := range ws {
			select {
			case w.ch <- nil:
			default:
			}
		}
	}
	if ids == nil {
		for _, ws := range l.waiters {
			wake(ws)
		}
		return
	}
	for _, id := range ids {
		wake(l.waiters[id])
	}
}
