package dispatch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/dispatch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/transport"
)

func TestMain(m *testing.M) { dbtest.Main(m, dbtest.CoreOptions()) }

func ids(t *testing.T, db *pgxpool.Pool, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := db.Query(t.Context(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return out
}

func scalar[T any](t *testing.T, db *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, db.QueryRow(t.Context(), sql, args...).Scan(&v))
	return v
}

func exec(t *testing.T, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := db.Exec(t.Context(), sql, args...)
	require.NoError(t, err)
}

func enqueue(t *testing.T, db *pgxpool.Pool, typ string, priority int) int64 {
	t.Helper()
	return scalar[int64](t, db, `select queues.enqueue($1, '{}', now(), $2)`, typ, priority)
}

const (
	dispatchSQL = `select * from queues.dispatch_tasks('redis', $1, $2)`
	claimIDs    = `select task_id from queues.claim_tasks_by_id('w1', $1)`
)

// dispatch_tasks marks due pending tasks once, in claim order, within the window; not-due and
// paused tasks wait.
func TestDispatchTasks(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	low := enqueue(t, db, "a", 0)
	high := enqueue(t, db, "a", 5)
	paused := enqueue(t, db, "p", 9)
	later := scalar[int64](t, db, `select queues.enqueue('a', '{}', now() + interval '1 hour')`)
	exec(t, db, `select queues.pause_queue('p')`)

	require.Equal(t, []int64{high, low}, ids(t, db, dispatchSQL, 500, 100))
	require.Empty(t, ids(t, db, dispatchSQL, 500, 100), "dispatched once")
	require.Equal(t, int64(2), scalar[int64](t, db, `select count(*) from queues.task where dispatched_at is not null`))

	exec(t, db, `select queues.resume_queue('p')`)
	require.Equal(t, []int64{paused}, ids(t, db, dispatchSQL, 500, 100))
	exec(t, db, `update queues.task set run_at = now() where task_id = $1`, later)
	require.Equal(t, []int64{later}, ids(t, db, dispatchSQL, 500, 100))
}

// The window: at most W tasks dispatched and unclaimed (W at least _min_window, else twice the
// transport's live concurrency); claiming makes room.
func TestDispatchWindow(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	for range 10 {
		enqueue(t, db, "a", 0)
	}
	first := ids(t, db, dispatchSQL, 500, 3)
	require.Len(t, first, 3)
	require.Empty(t, ids(t, db, dispatchSQL, 500, 3), "window full")
	require.Len(t, ids(t, db, claimIDs, first[:2]), 2)
	require.Len(t, ids(t, db, dispatchSQL, 500, 3), 2, "claims made room")

	// Two live workers of pool size 2 on the transport: W = 8.
	exec(t, db, `select queues.register_worker('w1', 'h', 1, 2, 'v', 'redis')`)
	exec(t, db, `select queues.register_worker('w2', 'h', 1, 2, 'v', 'redis')`)
	exec(t, db, `select queues.register_worker('w3', 'h', 1, 50, 'v', 'sqs')`)
	require.Len(t, ids(t, db, dispatchSQL, 500, 3), 5, "3 in flight, 5 more to make 8")
	require.Len(t, ids(t, db, dispatchSQL, 1, 100), 0)
}

// A task that comes back to pending after a claim (a retry) is undispatched by its new lease and
// dispatched again; a failed send's marks are cleared.
func TestDispatchAgainAfterClaim(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	id := enqueue(t, db, "a", 0)
	require.Equal(t, []int64{id}, ids(t, db, dispatchSQL, 500, 100))
	require.Equal(t, []int64{id}, ids(t, db, claimIDs, []int64{id}))
	lease := scalar[int64](t, db, `select lease_id from queues.task where task_id = $1`, id)
	exec(t, db, `select queues.fail_task($1, 'boom', $2)`, id, lease)
	exec(t, db, `update queues.task set run_at = now() where task_id = $1`, id) // no backoff
	require.Equal(t, []int64{id}, ids(t, db, dispatchSQL, 500, 100), "the retry is dispatched")

	require.Equal(t, 1, scalar[int](t, db, `select queues.undispatch_tasks($1)`, []int64{id}))
	require.Equal(t, []int64{id}, ids(t, db, dispatchSQL, 500, 100), "a cleared mark is dispatched again")
}

// claim_tasks_by_id claims each id once, with a lease and an event, and refuses what is not
// claimable.
func TestClaimTasksByID(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	a, b := enqueue(t, db, "a", 0), enqueue(t, db, "a", 0)
	later := scalar[int64](t, db, `select queues.enqueue('a', '{}', now() + interval '1 hour')`)
	paused := enqueue(t, db, "p", 0)
	exec(t, db, `select queues.pause_queue('p')`)

	got := ids(t, db, claimIDs, []int64{b, a, a, later, paused, 999999})
	slices.Sort(got)
	require.Equal(t, []int64{a, b}, got)
	require.Empty(t, ids(t, db, claimIDs, []int64{a, b}), "a duplicate is refused")
	require.Equal(t, int64(2), scalar[int64](t, db, `select count(*) from queues.task_lease`))
	require.Equal(t, int64(2), scalar[int64](t, db, `select count(*) from queues.task_history where event = 'claimed'`))
	require.Equal(t, "w1", scalar[string](t, db, `select worker_id from queues.task where task_id = $1`, a))
	require.Empty(t, ids(t, db, `select task_id from queues.claim_tasks_by_id('w1', $1, _task_types => '{x}')`, []int64{later}))
	require.Empty(t, ids(t, db, claimIDs, []int64{}))
}

// Concurrent claims of the same ids (duplicated messages on several workers): each task is
// claimed exactly once.
func TestClaimTasksByIDConcurrent(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 8})
	var all []int64
	for range 200 {
		all = append(all, enqueue(t, db, "a", 0))
	}
	var mu sync.Mutex
	claimed := map[int64]int{}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			order := slices.Clone(all)
			if w%2 == 1 {
				slices.Reverse(order)
			}
			for i := 0; i < len(order); i += 20 {
				got := ids(t, db, claimIDs, order[i:i+20])
				mu.Lock()
				for _, id := range got {
					claimed[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, claimed, 200)
	for id, n := range claimed {
		require.Equal(t, 1, n, "task %d", id)
	}
}

// redispatch_stale (the reclaimer) sends again what was dispatched and not claimed in time, with
// a 'redispatched' event, and clears the stale marks of tasks that are not due.
func TestRedispatchStale(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	lost, claimed, retried := enqueue(t, db, "a", 0), enqueue(t, db, "a", 0), enqueue(t, db, "a", 0)
	require.Len(t, ids(t, db, dispatchSQL, 500, 100), 3)
	require.Len(t, ids(t, db, claimIDs, []int64{claimed, retried}), 2)
	lease := scalar[int64](t, db, `select lease_id from queues.task where task_id = $1`, retried)
	exec(t, db, `select queues.fail_task($1, 'boom', $2)`, retried, lease)
	exec(t, db, `update queues.task set run_at = now() + interval '1 hour' where task_id = $1`, retried)

	require.Empty(t, ids(t, db, `select * from queues.redispatch_stale('1 hour')`), "nothing that old")
	require.Equal(t, []int64{lost}, ids(t, db, `select * from queues.redispatch_stale('0 seconds')`))
	require.Equal(t, int64(1), scalar[int64](t, db, `select count(*) from queues.task_event where event = 'redispatched' and task_id = $1`, lost))
	require.True(t, scalar[bool](t, db, `select dispatched_at is null from queues.task where task_id = $1`, retried), "stale mark cleared")
	require.Equal(t, int64(1), scalar[int64](t, db, `select count(*) from queues.task where status = 'pending' and dispatched_at is not null`))
}

// The worker role can call the four functions; PUBLIC cannot.
func TestDispatchGrants(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	for _, fn := range []string{
		"queues.claim_tasks_by_id(text, bigint[], interval, text[])",
		"queues.dispatch_tasks(text, integer, integer, text[])",
		"queues.undispatch_tasks(bigint[])",
		"queues.redispatch_stale(interval, integer, text[])",
	} {
		require.True(t, scalar[bool](t, db, `select has_function_privilege('worker_service_user', $1, 'execute')`, fn), fn)
		require.False(t, scalar[bool](t, db, `select bool_or(a.grantee = 0) from pg_proc p, aclexplode(p.proacl) a where p.oid = $1::regprocedure`, fn), fn)
	}
}

// failing is a transport whose sends fail.
type failing struct{ transport.Transport }

func (failing) Name() string                        { return "redis" }
func (failing) Send(context.Context, []int64) error { return errors.New("connection refused") }
func (failing) Ping(context.Context) error          { return errors.New("connection refused") }
func (failing) Close() error                        { return nil }

// A failed send leaves the task eligible (its mark cleared) and marks the transport down; the
// dispatcher then waits for it to come back.
func TestDispatcherFailedSend(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	id := enqueue(t, db, "a", 0)
	h := dispatch.NewHealth()
	down := make(chan error, 1)
	h.OnDown = func(err error) { down <- err }
	d := dispatch.NewDispatcher(db, dispatch.DispatcherConfig{Transport: failing{}, Health: h})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	require.ErrorContains(t, <-down, "connection refused")
	cancel()
	<-done
	require.True(t, h.IsDown())
	require.True(t, scalar[bool](t, db, `select dispatched_at is null and status = 'pending' from queues.task where task_id = $1`, id))
}

// Two dispatchers at once never send one task twice in a window.
func TestDispatchersConcurrent(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 8})
	exec(t, db, `select queues.enqueue_many(array_fill('a'::text, array[2000]), array_fill('{}'::jsonb, array[2000]))`)
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				got := ids(t, db, dispatchSQL, 50, 5000)
				mu.Lock()
				for _, id := range got {
					seen[id]++
				}
				n := len(seen)
				mu.Unlock()
				if n == 2000 {
					return
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 2000)
	for id, n := range seen {
		require.Equal(t, 1, n, "task %d sent twice", id)
	}
}
