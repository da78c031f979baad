package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The worker's session (Config.Session): the connection it registers on and holds for its
// life. Its advisory lock tells the leader whether the worker lives (migrations/core/
// functions/internal/worker_session_state.sql). After the registration it waits, reading, so that a connection the
// server or the network ended is noticed at once and replaced; every HeartbeatInterval it checks
// that its backend is still the one it registered on (a transaction pooler would change it).

// sessionRetryMin and the heartbeat interval bound the wait between attempts at opening a
// session: short at first, so a worker whose connection dropped is back within the grace.
const sessionRetryMin = 20 * time.Millisecond

// runSession opens the session, registers on it, and holds it until hold is done; when it is
// lost (or the heartbeat found the worker reaped) it opens another and registers again, until
// ctx is done. It returns once hold is done, after closing the session: Run ends hold after
// deregistering, so the leader never sees a registered worker without its session for that.
func (m *Maintainer) runSession(ctx, hold context.Context) {
	backoff := sessionRetryMin
	again := false
	for ctx.Err() == nil {
		conn, reg, err := m.openSession(ctx, again)
		if err != nil {
			// (Also while another live process holds the id: 55006, in the log.)
			m.fail(ctx, "session", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, m.cfg.HeartbeatInterval)
			continue
		}
		backoff = sessionRetryMin
		m.registered.Store(true)
		m.reaped.Store(false)
		if reg.recovered > 0 {
			m.log.Warn("maintenance: took over this worker id from a previous process that is gone; its running tasks were recovered",
				slog.Int("tasks_recovered", reg.recovered))
		}
		again = m.everRegistered.Swap(true) || again
		m.emit(Event{Kind: EventRegistered, Reregistered: again, Tasks: reg.recovered})
		m.wakeLeadership()
		again = true

		reset, lost := m.holdSession(hold, conn, reg.pid)
		closeSession(hold, conn)
		if hold.Err() != nil {
			return
		}
		m.registered.Store(false)
		m.wakeLeadership() // a worker without its session may not lead
		if errors.Is(lost, errPooledSession) {
			// Its lock sits on a server connection the pooler shares: it says nothing of this
			// worker, and would go when the pooler closes that connection. Heartbeats alone.
			m.log.Error("maintenance: the session goes through a transaction pooler (its server connection changed); "+
				"going on without one, found dead by heartbeats alone: run the worker PollOnly, or give it a direct connection (ListenConfig)",
				slog.Any("error", lost))
			m.sessionOff.Store(true)
			m.emit(Event{Kind: EventSessionLost, Err: lost})
			m.registerOnce(ctx, true)
			break
		}
		if !reset {
			m.log.Warn("maintenance: the session connection was lost; registering again on a new one",
				slog.Any("error", lost), slog.Duration("grace", m.cfg.SessionGrace))
			m.emit(Event{Kind: EventSessionLost, Err: lost})
		}
	}
	<-hold.Done()
}

// errPooledSession: the session's backend changed under it (a transaction pooler).
var errPooledSession = errors.New("the session's server connection changed")

// hasSession reports whether the worker registers on a session.
func (m *Maintainer) hasSession() bool { return m.cfg.Session != nil && !m.sessionOff.Load() }

// registration is what a registration on a session returned.
type registration struct {
	recovered int   // tasks of a previous process under the same id, recovered
	pid       int32 // the session's backend
}

// openSession opens a session and registers the worker on it.
func (m *Maintainer) openSession(ctx context.Context, again bool) (*pgx.Conn, registration, error) {
	var reg registration
	cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.HeartbeatInterval))
	defer cancel()
	conn, err := m.cfg.Session(cctx)
	if err != nil {
		return nil, reg, fmt.Errorf("open the session: %w", err)
	}
	// The session waits idle for as long as the worker lives: a server-wide idle timeout must
	// not end it (PostgreSQL 14+; older servers have none).
	if _, err := conn.Exec(cctx, "set idle_session_timeout = 0"); err != nil && !isUndefinedParameter(err) {
		closeSession(ctx, conn)
		return nil, reg, fmt.Errorf("set up the session: %w", err)
	}
	// A reset asked for before this registration is answered by it.
	select {
	case <-m.sessionReset:
	default:
	}
	reg.recovered, err = m.registerOn(cctx, conn, true)
	if err == nil {
		err = conn.QueryRow(cctx, `select pg_backend_pid()`).Scan(&reg.pid)
	}
	if err != nil {
		closeSession(ctx, conn)
		verb := "register"
		if again {
			verb = "register again"
		}
		return nil, reg, fmt.Errorf("%s on the session: %w", verb, err)
	}
	return conn, reg, nil
}

// holdSession waits on conn until the connection fails (lost: the error), hold is done, or a
// reset is asked for (reset). Every HeartbeatInterval it checks that the session's backend is
// still pid: behind a transaction pooler it changes (lost: errPooledSession).
func (m *Maintainer) holdSession(hold context.Context, conn *pgx.Conn, pid int32) (reset bool, lost error) {
	netConn := conn.PgConn().Conn()
	var mu sync.Mutex
	interrupted, wasReset := false, false
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		r := false
		select {
		case <-hold.Done():
		case <-m.sessionReset:
			r = true
		case <-stop:
			return
		}
		mu.Lock()
		interrupted, wasReset = true, r
		_ = netConn.SetReadDeadline(time.Now())
		mu.Unlock()
	}()
	for {
		mu.Lock()
		if interrupted {
			mu.Unlock()
			return wasReset, nil
		}
		_ = netConn.SetReadDeadline(time.Now().Add(m.cfg.HeartbeatInterval))
		mu.Unlock()
		// Nobody LISTENs on the session: no notification comes. The read returns when the
		// connection fails, or at the deadline. (A context that can be cancelled would make
		// pgx send a cancel request on a new connection: this one never is.)
		err := conn.PgConn().WaitForNotification(context.WithoutCancel(hold))
		if err == nil {
			continue
		}
		mu.Lock()
		stopped, r := interrupted, wasReset
		_ = netConn.SetReadDeadline(time.Time{})
		mu.Unlock()
		switch {
		case stopped:
			return r, nil
		case !pgconn.Timeout(err):
			return false, err
		}
		var now int32
		cctx, cancel := context.WithTimeout(hold, callTimeout(m.cfg.HeartbeatInterval))
		err = conn.QueryRow(cctx, `select pg_backend_pid()`).Scan(&now)
		cancel()
		switch {
		case hold.Err() != nil:
			return false, nil
		case err != nil:
			return false, err
		case now != pid:
			return false, fmt.Errorf("%w: backend %d, registered on %d", errPooledSession, now, pid)
		}
	}
}

// closeSession closes a session without waiting long on a connection that may be dead.
func closeSession(ctx context.Context, conn *pgx.Conn) {
	_ = conn.PgConn().Conn().SetDeadline(time.Now().Add(time.Second))
	_ = conn.Close(context.WithoutCancel(ctx))
}

// requestSessionReset asks the session goroutine to register again on a new session.
func (m *Maintainer) requestSessionReset() {
	select {
	case m.sessionReset <- struct{}{}:
	default:
	}
}

// isUndefinedParameter reports whether err is PostgreSQL's "unrecognized configuration
// parameter".
func isUndefinedParameter(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704"
}
