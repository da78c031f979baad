package maintenance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// waitTimeout bounds every wait for an event: generous, since tests run in parallel.
const waitTimeout = 15 * time.Second

// events records the events of one or more Maintainers, for tests to wait on.
type events struct {
	mu      sync.Mutex
	list    []Event
	who     []string // the worker id of each event
	changed chan struct{}
}

func newEvents() *events { return &events{changed: make(chan struct{})} }

// hook returns an OnEvent function recording the events of worker id.
func (e *events) hook(id string) func(Event) {
	return func(ev Event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.list = append(e.list, ev)
		e.who = append(e.who, id)
		close(e.changed)
		e.changed = make(chan struct{})
	}
}

// waitFrom returns the first event at index >= *from for which match is true, with the worker
// it came from, and moves *from past it. It fails the test after waitTimeout.
func (e *events) waitFrom(t testing.TB, from *int, what string, match func(string, Event) bool) (string, Event) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		e.mu.Lock()
		for i := *from; i < len(e.list); i++ {
			if match(e.who[i], e.list[i]) {
				*from = i + 1
				who, ev := e.who[i], e.list[i]
				e.mu.Unlock()
				return who, ev
			}
		}
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s event within %s; seen: %s", what, waitTimeout, e.summary())
		}
	}
}

// summary describes the events seen so far, for a failure message: how many of each kind per
// worker, and the last few errors.
func (e *events) summary() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	counts := map[string]int{}
	var errs []string
	for i, ev := range e.list {
		counts[e.who[i]+" "+ev.Kind.String()]++
		if ev.Kind == EventError {
			errs = append(errs, fmt.Sprintf("%s %s: %v", e.who[i], ev.Op, ev.Err))
		}
	}
	if len(errs) > 5 {
		errs = errs[len(errs)-5:]
	}
	return fmt.Sprintf("%v; last errors: %q", counts, errs)
}

// wait is waitFrom from the first event.
func (e *events) wait(t testing.TB, what string, match func(string, Event) bool) (string, Event) {
	t.Helper()
	from := 0
	return e.waitFrom(t, &from, what, match)
}

// len returns the number of events so far: waitFrom from it waits for a later one.
func (e *events) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.list)
}

// count returns the number of events for which match is true.
func (e *events) count(match func(string, Event) bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for i := range e.list {
		if match(e.who[i], e.list[i]) {
			n++
		}
	}
	return n
}

func kind(k EventKind) func(string, Event) bool {
	return func(_ string, e Event) bool { return e.Kind == k }
}

func kindOf(id string, k EventKind) func(string, Event) bool {
	return func(w string, e Event) bool { return w == id && e.Kind == k }
}

// testConfig returns a Config with short intervals, the worker id given, and events recorded.
func testConfig(id string, ev *events) Config {
	return Config{
		WorkerID:          id,
		Hostname:          "testhost",
		PID:               4242,
		PoolSize:          8,
		Version:           "test",
		HeartbeatInterval: 50 * time.Millisecond,
		WorkerTimeout:     10 * time.Second,
		LeaderTTL:         600 * time.Millisecond,
		PruneInterval:     50 * time.Millisecond,
		ScheduleInterval:  20 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent:           ev.hook(id),
	}
}

// running is a Maintainer whose Run goroutine a test can stop.
type running struct {
	*Maintainer
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned, with err
	err    error
}

// stop cancels Run and waits for it to return.
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		require.NoError(t, r.err)
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

// start runs a Maintainer with cfg until the test ends (or stop).
func start(t *testing.T, db *pgxpool.Pool, cfg Config) *running {
	t.Helper()
	m, err := New(db, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{Maintainer: m, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = m.Run(ctx)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// fakeClock is a Config.Now a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func scalar[T any](t testing.TB, db DB, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, db.QueryRow(t.Context(), sql, args...).Scan(&v), sql)
	return v
}

func mustExec(t testing.TB, db DB, sql string, args ...any) {
	t.Helper()
	_, err := db.Exec(t.Context(), sql, args...)
	require.NoError(t, err, sql)
}

// lead registers worker id (without a session) and makes it the leader for an hour; it returns
// the term.
func lead(t testing.TB, db DB, id string) int64 {
	t.Helper()
	mustExec(t, db, `select queues.register_worker($1, 'testhost')`, id)
	return scalar[int64](t, db, `select queues.acquire_leadership($1, interval '1 hour')`, id)
}
