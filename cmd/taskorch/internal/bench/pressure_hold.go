package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// held is what a pressure phase holds open: connections with a transaction each, released at
// the phase's end.
type held struct {
	conns []*pgx.Conn
	pids  []int32
	xid   int64 // the open-xid transaction's txid_current()
	// readers: their scans, and how to stop them.
	scans  atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

// connect opens a connection of its own on the benchmark database, outside every pool.
func (e *Env) connect(ctx context.Context) (*pgx.Conn, int32, error) {
	c, err := pgx.ConnectConfig(ctx, e.cfg.ConnConfig.Copy())
	if err != nil {
		return nil, 0, fmt.Errorf("bench: connect: %w", err)
	}
	var pid int32
	if err := c.QueryRow(ctx, `select pg_backend_pid()`).Scan(&pid); err != nil {
		_ = c.Close(ctx)
		return nil, 0, err
	}
	return c, pid, nil
}

// holdXID opens a transaction and has it assigned an xid (txid_current()), then leaves it
// open: no row version deleted after it began can be vacuumed away while it lasts.
func (e *Env) holdXID(ctx context.Context) (*held, error) {
	c, pid, err := e.connect(ctx)
	if err != nil {
		return nil, err
	}
	h := &held{conns: []*pgx.Conn{c}, pids: []int32{pid}}
	if _, err := c.Exec(ctx, `begin`); err != nil {
		h.release(ctx)
		return nil, err
	}
	if err := c.QueryRow(ctx, `select txid_current()`).Scan(&h.xid); err != nil {
		h.release(ctx)
		return nil, err
	}
	return h, nil
}

// readerTables are what the readers scan, over and over.
var readerTables = []string{
	`select count(*) from queues.task`,
	`select count(*) from queues.task_lease`,
	`select count(*) from queues.task_event`,
}

// holdReaders opens n REPEATABLE READ transactions that scan the queue tables until release,
// pause apart, each keeping the snapshot of its first scan for the whole phase.
func (e *Env) holdReaders(ctx context.Context, n int, pause time.Duration) (*held, error) {
	h := &held{errs: make(chan error, n)}
	for range n {
		c, pid, err := e.connect(ctx)
		if err != nil {
			h.release(ctx)
			return nil, err
		}
		h.conns, h.pids = append(h.conns, c), append(h.pids, pid)
		if _, err := c.Exec(ctx, `begin isolation level repeatable read`); err != nil {
			h.release(ctx)
			return nil, err
		}
		// The snapshot is taken by the first statement: take it now, before the phase runs.
		if _, err := c.Exec(ctx, readerTables[0]); err != nil {
			h.release(ctx)
			return nil, err
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	for i, c := range h.conns {
		h.wg.Go(func() {
			for j := i; rctx.Err() == nil; j++ {
				if _, err := c.Exec(rctx, readerTables[j%len(readerTables)]); err != nil {
					if rctx.Err() == nil {
						h.errs <- fmt.Errorf("bench: reader: %w", err)
					}
					return
				}
				h.scans.Add(1)
				if pause > 0 {
					select {
					case <-rctx.Done():
					case <-time.After(pause):
					}
				}
			}
		})
	}
	return h, nil
}

// check records in p what pg_stat_activity shows of the held transactions: the open-xid
// transaction's backend_xid, or how many readers hold a snapshot. A held transaction that is
// not there is an error: the phase did not put the pressure it names.
func (h *held) check(ctx context.Context, e *Env, p *PressurePhase) error {
	select {
	case err := <-h.errs:
		return err
	default:
	}
	if h.cancel == nil { // the open xid
		var xid *int64
		if err := e.admin.QueryRow(ctx, `select backend_xid::text::bigint from pg_stat_activity where pid = $1`, h.pids[0]).Scan(&xid); err != nil {
			return fmt.Errorf("bench: read the held xid: %w", err)
		}
		if xid == nil || *xid != h.xid%(1<<32) {
			return fmt.Errorf("bench: the open-xid transaction holds no xid %d (pg_stat_activity: %v)", h.xid, xid)
		}
		p.HolderBackendXID = *xid
		return nil
	}
	if err := e.admin.QueryRow(ctx, `select count(*) from pg_stat_activity where pid = any($1) and backend_xmin is not null`, h.pids).
		Scan(&p.ReaderSnapshots); err != nil {
		return fmt.Errorf("bench: read the readers' snapshots: %w", err)
	}
	p.ReaderScans = h.scans.Load()
	if p.ReaderSnapshots != len(h.pids) {
		return fmt.Errorf("bench: %d of %d readers hold a snapshot", p.ReaderSnapshots, len(h.pids))
	}
	return nil
}

// release ends the held transactions (rolled back) and closes their connections.
func (h *held) release(ctx context.Context) {
	if h.cancel != nil {
		h.cancel()
		h.wg.Wait()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, c := range h.conns {
		if !c.IsClosed() {
			_, _ = c.Exec(ctx, `rollback`)
		}
		_ = c.Close(ctx)
	}
}
