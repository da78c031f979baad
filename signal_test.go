package taskorch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// requireSQLState asserts that err is a PostgreSQL error with code and a message matching re.
func requireSQLState(t *testing.T, err error, code, re, sql string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%s: want SQLSTATE %s, got %v", sql, code, err)
	require.Equal(t, code, pgErr.Code, "%s: %s", sql, pgErr.Message)
	require.Regexp(t, re, pgErr.Message, sql)
}

// waitBlockedOnLock waits until the backend pid waits for a lock: a session that got there first
// holds it.
func waitBlockedOnLock(t *testing.T, db taskorch.DBTX, pid uint32) {
	t.Helper()
	require.Eventually(t, func() bool {
		return scalar[bool](t, db, `select coalesce((select wait_event_type = 'Lock' from pg_stat_activity where pid = $1), false)`, int64(pid))
	}, 20*time.Second, 2*time.Millisecond, "backend %d never waited for a lock", pid)
}

// The first emit of a signal records it and returns true; a duplicate returns false and changes
// nothing; the recorded row is append-only.
func TestSignalFirstEmitWins(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	require.Nil(t, scalar[*string](t, tx, `select queues.signal_payload('email.confirmed', 'a@example.com')::text`))
	require.True(t, scalar[bool](t, tx, `select queues.signal('email.confirmed', 'a@example.com', '{"ip": "1.2.3.4"}')`))
	require.False(t, scalar[bool](t, tx, `select queues.signal('email.confirmed', 'a@example.com', '{"ip": "5.6.7.8"}')`))
	require.False(t, scalar[bool](t, tx, `select queues.signal('email.confirmed', 'a@example.com')`))
	require.JSONEq(t, `{"ip": "1.2.3.4"}`, scalar[string](t, tx, `select queues.signal_payload('email.confirmed', 'a@example.com')::text`))
	require.Equal(t, int64(1), scalar[int64](t, tx, `select count(*) from queues.signal where name = 'email.confirmed'`))

	// Another key, another name: separate signals; the default payload is {}.
	require.True(t, scalar[bool](t, tx, `select queues.signal('email.confirmed', 'b@example.com')`))
	require.True(t, scalar[bool](t, tx, `select queues.signal('email.bounced', 'a@example.com')`))
	require.Equal(t, "{}", scalar[string](t, tx, `select queues.signal_payload('email.confirmed', 'b@example.com')::text`))

	_, err := tx.Exec(context.Background(), `update queues.signal set payload = '{"forged": true}'`)
	requireSQLState(t, err, "42501", `queues\.signal holds facts, which are append-only`, "update")
}

// Two sessions emitting the same signal at once record it exactly once: one call returns true,
// the other false, and the winner's payload stays. Run many times, with both sessions inside
// transactions started together, and once with the loser provably waiting on the winner.
func TestSignalConcurrentEmitsRecordOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)

	for round := range 20 {
		key := fmt.Sprintf("k%d", round)
		start := make(chan struct{})
		var wg sync.WaitGroup
		var won [2]bool
		var errs [2]error
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, `select queues.signal('race', $1, jsonb_build_object('by', $2::int))`, key, i).Scan(&won[i])
				})
			}()
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.True(t, won[0] != won[1], "round %d: exactly one emit wins, got %v", round, won)
		winner := 0
		if won[1] {
			winner = 1
		}
		require.Equal(t, int64(winner), scalar[int64](t, pool, `select (queues.signal_payload('race', $1) ->> 'by')::bigint`, key))
	}
	require.Equal(t, int64(20), scalar[int64](t, pool, `select count(*) from queues.signal where name = 'race'`))

	// Deterministic interleaving: A records and holds its transaction open; B's emit waits for it
	// and, once A commits, finds the signal there.
	a, err := pool.Begin(ctx)
	require.NoError(t, err)
	b, err := pool.Acquire(ctx)
	require.NoError(t, err)
	bWon := make(chan bool, 1)
	bDone := make(chan struct{})
	defer func() { // also when the test fails half way: a first, so that b finishes, then b
		_ = a.Rollback(ctx)
		<-bDone
		b.Release()
	}()
	require.True(t, scalar[bool](t, a, `select queues.signal('race', 'held', '{"by": "a"}')`))
	go func() {
		defer close(bDone)
		var w bool
		_ = pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `select queues.signal('race', 'held', '{"by": "b"}')`).Scan(&w)
		})
		bWon <- w
	}()
	waitBlockedOnLock(t, pool, b.Conn().PgConn().PID())
	require.NoError(t, a.Commit(ctx))
	require.False(t, <-bWon, "the second emit loses")
	require.Equal(t, "a", scalar[string](t, pool, `select queues.signal_payload('race', 'held') ->> 'by'`))
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from queues.signal where name = 'race' and key = 'held'`))
}

// Bad input to signal and wait_for_signal is refused with a clear error and its SQLSTATE, and
// nothing is written.
func TestSignalBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	pending := scalar[int64](t, pool, `select queues.enqueue('sig.w', '{}', now() + interval '1 hour')`)
	done := scalar[int64](t, pool, `select queues.enqueue('sig.done', '{}')`)
	mustExec(t, pool, `update queues.task set status = 'completed', completed_at = now() where task_id = $1`, done)

	for _, tc := range []struct{ sql, code, re string }{
		{`select queues.signal(null, 'k')`, "22023", `^signal: name must not be empty$`},
		{`select queues.signal('', 'k')`, "22023", `^signal: name must not be empty$`},
		{`select queues.signal(repeat('n', 129), 'k')`, "22023", `^signal: name is 129 characters, over the limit of 128$`},
		{`select queues.signal('n', null)`, "22023", `^signal: key must not be empty$`},
		{`select queues.signal('n', '')`, "22023", `^signal: key must not be empty$`},
		{`select queues.signal('n', repeat('k', 513))`, "22023", `^signal: key is 513 characters, over the limit of 512$`},
		{`select queues.signal('n', 'k', null)`, "22023", `^signal: payload must be a JSON object, got null$`},
		{`select queues.signal('n', 'k', 'null')`, "22023", `^signal: payload must be a JSON object, got null$`},
		{`select queues.signal('n', 'k', '[1]')`, "22023", `^signal: payload must be a JSON object, got array$`},
		{`select queues.signal('n', 'k', '"s"')`, "22023", `^signal: payload must be a JSON object, got string$`},
		{`select queues.signal('n', 'k', jsonb_build_object('blob', repeat('x', 9 * 1024 * 1024)))`, "22023",
			`^signal: payload is \d+ bytes, over the limit of 8388608 bytes \(8 MiB\) per signal$`},
		{`select queues.wait_for_signal('', 'k', 1)`, "22023", `^wait_for_signal: name must not be empty$`},
		{`select queues.wait_for_signal('n', null, 1)`, "22023", `^wait_for_signal: key must not be empty$`},
		{`select queues.wait_for_signal('n', 'k', null)`, "22023", `^wait_for_signal: task_id must not be null$`},
		{`select queues.wait_for_signal('n', 'k', -1)`, "P0002", `^wait_for_signal: task -1 does not exist$`},
		{fmt.Sprintf(`select queues.wait_for_signal('n', 'k', %d)`, done), "55000",
			fmt.Sprintf(`^wait_for_signal: task %d is completed; only a pending task can wait for a signal$`, done)},
	} {
		_, err := pool.Exec(ctx, tc.sql)
		requireSQLState(t, err, tc.code, tc.re, tc.sql)
		require.NotContains(t, err.Error(), "xxxxxxxx", "no payload echoed")
		if tc.code == "22023" {
			require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrInvalidInput, tc.sql)
		}
	}
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.signal`), "no signal written")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.signal_wait`), "no wait written")
	require.True(t, scalar[bool](t, pool, `select run_at > now() + interval '50 minutes' from queues.task where task_id = $1`, pending),
		"the pending task was not touched")
	require.Nil(t, scalar[*string](t, pool, `select queues.signal_payload('n', 'k')::text`))

	// A bad emit inside a transaction leaves the transaction's earlier work to the caller: the
	// error aborts the transaction and nothing of it is recorded.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `select queues.signal('n', 'first')`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `select queues.signal('n', 'second', '[]')`)
		return err
	})
	require.Error(t, err)
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.signal`), "nothing half-written")
}

// A supervisor's next run waits for a signal: the signal makes it due at once and wakes an idle
// worker, which runs it within a second though its deadline is an hour away and the worker
// polls only every 30 s (the NOTIFY woke it). The run sees the signal's payload.
func TestSignalWakesWaitingTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)

	type run struct {
		at      time.Time
		payload *string
	}
	ran := make(chan run, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("sig.supervisor", func(ctx context.Context, task *taskorch.Task) error {
		var p *string
		if err := pool.QueryRow(ctx, `select queues.signal_payload('email.confirmed', 'p-1')::text`).Scan(&p); err != nil {
			return err
		}
		ran <- run{at: time.Now(), payload: p}
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, PollInterval: 30 * time.Second, MaxPollInterval: 30 * time.Second})

	// The supervisor's next run at its deadline, registered to wait, in one transaction.
	var id int64
	var already bool
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `select queues.enqueue('sig.supervisor', '{}', now() + interval '1 hour')`).Scan(&id); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `select queues.wait_for_signal('email.confirmed', 'p-1', $1)`, id).Scan(&already)
	}))
	require.False(t, already, "the signal has not arrived")
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from queues.signal_wait where task_id = $1`, id))

	// The worker has made its first poll and listens; the enqueue's own NOTIFY has come and gone.
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select exists (select from pg_stat_activity where datname = current_database()
			and query = 'listen taskorch_cancel' and state = 'idle')`)
	}, 20*time.Second, 5*time.Millisecond, "the worker never listened")
	select {
	case r := <-ran:
		t.Fatalf("the task ran before its signal, at %v", r.at)
	default:
	}

	sent := time.Now()
	require.True(t, scalar[bool](t, pool, `select queues.signal('email.confirmed', 'p-1', '{"via": "link"}')`))
	select {
	case r := <-ran:
		took := r.at.Sub(sent)
		t.Logf("signal to run: %v", took)
		require.Less(t, took, time.Second, "the signal woke the task at once")
		require.NotNil(t, r.payload)
		require.JSONEq(t, `{"via": "link"}`, *r.payload)
	case <-time.After(10 * time.Second):
		t.Fatal("the signalled task did not run within 10 s")
	}
	waitStatus(t, pool, id, taskorch.StatusCompleted)
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.signal_wait`), "the wait is consumed")
	require.Equal(t, "made due by signal 'email.confirmed' key 'p-1'",
		scalar[string](t, pool, `select detail from queues.task_event where task_id = $1 and event = 'signalled'`, id))
}

// A signal that arrived before the wait: wait_for_signal makes the task due at once and says
// so. A task already due is left as it is, and a repeated wait is harmless.
func TestSignalBeforeWait(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	require.True(t, scalar[bool](t, tx, `select queues.signal('order.paid', 'o-7', '{"amount": 12}')`))
	id := scalar[int64](t, tx, `select queues.enqueue('sig.before', '{}', now() + interval '1 day')`)
	require.True(t, scalar[bool](t, tx, `select queues.wait_for_signal('order.paid', 'o-7', $1)`, id))
	require.True(t, scalar[bool](t, tx, `select run_at <= now() from queues.task where task_id = $1`, id), "due at once")
	require.True(t, scalar[bool](t, tx, `select queues.wait_for_signal('order.paid', 'o-7', $1)`, id))
	require.Equal(t, int64(1), scalar[int64](t, tx, `select count(*) from queues.task_event where task_id = $1 and event = 'signalled'`, id),
		"made due once")
	require.Zero(t, scalar[int64](t, tx, `select count(*) from queues.signal_wait`), "nothing left waiting")

	// Waiting twice before the signal registers once; the signal moves the task once.
	other := scalar[int64](t, tx, `select queues.enqueue('sig.before', '{}', now() + interval '1 day')`)
	require.False(t, scalar[bool](t, tx, `select queues.wait_for_signal('order.shipped', 'o-7', $1)`, other))
	require.False(t, scalar[bool](t, tx, `select queues.wait_for_signal('order.shipped', 'o-7', $1)`, other))
	require.Equal(t, int64(1), scalar[int64](t, tx, `select count(*) from queues.signal_wait where task_id = $1`, other))
	require.True(t, scalar[bool](t, tx, `select run_at > now() from queues.task where task_id = $1`, other), "not due before its signal")
	require.True(t, scalar[bool](t, tx, `select queues.signal('order.shipped', 'o-7')`))
	require.True(t, scalar[bool](t, tx, `select run_at <= now() from queues.task where task_id = $1`, other))
}

// A wait registered while the signal is being emitted is not missed, in either order: the
// second of the two to take the (name, key) lock waits for the first to commit and sees it.
func TestSignalWaitRacesEmit(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	for _, waitFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("waitFirst=%v", waitFirst), func(t *testing.T) {
			raceWaitAndSignal(t, pool, waitFirst)
		})
	}
}

func raceWaitAndSignal(t *testing.T, pool *pgxpool.Pool, waitFirst bool) {
	ctx := context.Background()
	key := fmt.Sprintf("wait-first-%v", waitFirst)
	id := scalar[int64](t, pool, `select queues.enqueue('sig.race', '{}', now() + interval '1 day')`)
	waitSQL := `select queues.wait_for_signal('race', $1, $2)`
	signalSQL := `select queues.signal('race', $1) and $2::bigint is not null`
	firstSQL, secondSQL := waitSQL, signalSQL
	if !waitFirst {
		firstSQL, secondSQL = signalSQL, waitSQL
	}

	first, err := pool.Begin(ctx)
	require.NoError(t, err)
	second, err := pool.Acquire(ctx)
	require.NoError(t, err)
	secondGot := make(chan bool, 1)
	secondDone := make(chan struct{})
	started := false
	defer func() { // also when the test fails half way: first, so that second finishes, then second
		_ = first.Rollback(ctx)
		if started {
			<-secondDone
		}
		second.Release()
	}()

	var firstGot bool
	require.NoError(t, first.QueryRow(ctx, firstSQL, key, id).Scan(&firstGot))
	started = true
	go func() {
		defer close(secondDone)
		var got bool
		_ = pgx.BeginFunc(ctx, second, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, secondSQL, key, id).Scan(&got)
		})
		secondGot <- got
	}()
	waitBlockedOnLock(t, pool, second.Conn().PgConn().PID())
	require.NoError(t, first.Commit(ctx))
	got := <-secondGot
	if waitFirst {
		require.False(t, firstGot, "registered")
		require.True(t, got, "the signal is recorded")
	} else {
		require.True(t, firstGot, "the signal is recorded")
		require.True(t, got, "the wait finds the signal")
	}
	require.True(t, scalar[bool](t, pool, `select run_at <= now() from queues.task where task_id = $1`, id), "the task is due")
}

// No signal: the task runs at its deadline (its own run_at) and sees signal_payload NULL, the
// supervisor's timeout branch. The wait row goes with the task when the task is deleted.
func TestSignalDeadlineWithoutSignal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)

	type run struct {
		at       time.Time
		arrived  bool
		deadline time.Time
	}
	ran := make(chan run, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("sig.timeout", func(ctx context.Context, task *taskorch.Task) error {
		var r run
		r.at = time.Now()
		if err := pool.QueryRow(ctx, `select queues.signal_payload('email.confirmed', 'p-2') is not null,
			(select scheduled_at from queues.task where task_id = $1)`, task.ID).Scan(&r.arrived, &r.deadline); err != nil {
			return err
		}
		ran <- r
		return nil
	})

	var id int64
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `select queues.enqueue('sig.timeout', '{}', now() + interval '1.5 seconds')`).Scan(&id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `select queues.wait_for_signal('email.confirmed', 'p-2', $1)`, id)
		return err
	}))
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs})
	select {
	case r := <-ran:
		require.False(t, r.arrived, "no signal: the timeout branch")
		require.False(t, r.at.Before(r.deadline), "ran at %v, before its deadline %v", r.at, r.deadline)
	case <-time.After(20 * time.Second):
		t.Fatal("the task did not run at its deadline")
	}
	waitStatus(t, pool, id, taskorch.StatusCompleted)

	// A late signal finds the task done: it is recorded and consumes the wait, and moves nothing.
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from queues.signal_wait where task_id = $1`, id))
	require.True(t, scalar[bool](t, pool, `select queues.signal('email.confirmed', 'p-2')`))
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.signal_wait`))
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task_event where task_id = $1 and event = 'signalled'`, id))
	require.Equal(t, "completed", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, id))

	// A wait goes with its task when the task is deleted (as the pruner deletes finished ones).
	gone := scalar[int64](t, pool, `select queues.enqueue('sig.timeout', '{}', now() + interval '1 day')`)
	require.False(t, scalar[bool](t, pool, `select queues.wait_for_signal('never', 'k', $1)`, gone))
	mustExec(t, pool, `delete from queues.task where task_id = $1`, gone)
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.signal_wait`))
}
