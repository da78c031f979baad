package taskorch_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// claimAtToken calls queues.claim_limited_tasks_at_token and returns the ids it leased.
// types nil: any.
func claimAtToken(ctx context.Context, db taskorch.DBTX, worker string, n int, maxWait string, types ...string) ([]int64, error) {
	var ts []string
	if len(types) > 0 {
		ts = types
	}
	rows, err := db.Query(ctx, `select task_id from queues.claim_limited_tasks_at_token($1, $2, interval '5 minutes', $4, $3::interval)`,
		worker, n, maxWait, ts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// sleepingAtToken reports whether a claim of this test's database is asleep in
// claim_limited_tasks_at_token, waiting for its token.
func sleepingAtToken(t *testing.T, pool *pgxpool.Pool) bool {
	return scalar[bool](t, pool, `select exists (select from pg_stat_activity
		where datname = current_database() and state = 'active' and wait_event = 'PgSleep'
		  and query like '%claim_limited_tasks_at_token%')`)
}

// Workers racing for a rate limit's tokens, through the claim that waits for its token in the
// database and through the claims that do not, never claim more than burst + rate × span (+ the
// slack, docs/limits.md) over any span of the database's claimed_at.
func TestClaimAtTokenBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	const rate, burst, want = 25.0, 2, 60
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.race", RatePerSecond: rate, Burst: burst}))
	mustExec(t, pool, `select queues.enqueue('lim.race', '{}') from generate_series(1, 200)`)

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	claimed := func() int64 {
		return scalar[int64](t, pool, `select count(*) from queues.task where claimed_at is not null`)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	race := func(worker string, claim func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := claim(); err != nil {
					errs <- err
					return
				}
				var n int64
				if err := pool.QueryRow(ctx, `select count(*) from queues.task where claimed_at is not null`).Scan(&n); err != nil || n >= want {
					return
				}
			}
		}()
	}
	for _, w := range []string{"at-token-1", "at-token-2", "at-token-3", "at-token-4"} {
		race(w, func() error { _, err := claimAtToken(ctx, pool, w, 5, "250 milliseconds"); return err })
	}
	race("due", func() error {
		_, err := pool.Exec(ctx, `select queues.claim_tasks('due', 5)`)
		return err
	})
	race("limited", func() error {
		_, err := pool.Exec(ctx, `select queues.claim_limited_tasks('limited', 5)`)
		return err
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, claimed(), int64(want))
	require.Greater(t, scalar[int64](t, pool, `select count(*) from queues.task where worker_id like 'at-token-%'`), int64(0),
		"the claims that wait for their token took some")

	// Every span between two claims, [a, b], holds at most burst + rate × (b - a) + slack claims.
	var worst float64
	var n int64
	require.NoError(t, pool.QueryRow(ctx, `
		with c as (select claimed_at, row_number() over (order by claimed_at, task_id) as i
		           from queues.task where claimed_at is not null)
		select count(*) filter (where b.i - a.i + 1 > $1 + $2 * extract(epoch from b.claimed_at - a.claimed_at) + internal.limit_slack($2)),
		       coalesce(max((b.i - a.i + 1) - ($1 + $2 * extract(epoch from b.claimed_at - a.claimed_at))), 0)
		from c a join c b on b.i >= a.i`, burst, rate).Scan(&n, &worst))
	require.Zero(t, n, "spans over burst + rate × span + slack (worst excess %.3f claims)", worst)
	require.GreaterOrEqual(t, scalar[float64](t, pool, `select min(tokens) + internal.limit_slack($1) from queues.limit_bucket`, rate),
		-1e-9, "the bucket never owes more than the slack")
}

// A claim that waits in the database for its token holds nothing that other claims wait for:
// while it sleeps, a claim of an unlimited type and one of another limit take their tasks, and
// one of the same limit finds no token yet. The claim then takes its
// token at or after the token's time. A pause of the type during its sleep stops it.
func TestClaimAtTokenWaitsInTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.tok", RatePerSecond: 1, Burst: 1}))
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.other", RatePerSecond: 1, Burst: 1}))
	mustExec(t, pool, `select queues.enqueue('lim.tok', '{}') from generate_series(1, 5)`)

	// Bad input is refused, and nothing is claimed.
	for _, q := range []string{
		`select queues.claim_limited_tasks_at_token('w', 1, _max_wait => interval '2 seconds')`,
		`select queues.claim_limited_tasks_at_token('w', 1, _max_wait => interval '-1 second')`,
		`select queues.claim_limited_tasks_at_token('w', 1, _max_wait => null)`,
		`select queues.claim_limited_tasks_at_token('w', 0)`,
		`select queues.claim_limited_tasks_at_token(' ', 1)`,
		`select queues.claim_limited_tasks_at_token('w', 1, interval '0')`,
	} {
		_, err := pool.Exec(ctx, q)
		require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrInvalidInput, q)
	}
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task where status <> 'pending'`))

	// A token is there: claimed at once.
	ids, err := claimAtToken(ctx, pool, "w", 5, "1 second")
	require.NoError(t, err)
	require.Len(t, ids, 1)
	// The next token is 1 s away, further than the claim may wait: nothing, at once.
	mustExec(t, pool, `update queues.limit_bucket set tokens = 0, refilled_at = clock_timestamp()`)
	ids, err = claimAtToken(ctx, pool, "w", 5, "100 milliseconds")
	require.NoError(t, err)
	require.Empty(t, ids)

	// Each part below needs the claim to be asleep for its token while the test acts. On a
	// loaded machine the claim may reach the database only after the token came (it then claims
	// at once, without sleeping), or the claim beside it may take longer than the sleep: the part
	// is then tried again, with the tasks given back.
	releaseOf := func(worker string) {
		mustExec(t, pool, `select queues.release_tasks(array_agg(task_id), array_agg(lease_id)) from queues.task
			where worker_id = $1 and status = 'running'`, worker)
	}
	type result struct {
		ids []int64
		err error
	}
	// asleep starts a claim of lim.tok whose token is about 0.9 s away, within its wait of 1 s,
	// and reports whether it was seen asleep for it before it returned (then done gives its
	// result later; else r is its result).
	asleep := func(worker string) (done chan result, r result, ok bool) {
		mustExec(t, pool, `update queues.limit_bucket set tokens = 0, refilled_at = clock_timestamp() - interval '100 milliseconds'
			where task_type = 'lim.tok'`)
		done = make(chan result, 1)
		go func() {
			ids, err := claimAtToken(ctx, pool, worker, 5, "1 second", "lim.tok")
			done <- result{ids, err}
		}()
		var finished bool
		require.Eventually(t, func() bool {
			select {
			case r = <-done:
				finished = true
				return true
			default:
			}
			return sleepingAtToken(t, pool)
		}, 30*time.Second, time.Millisecond)
		return done, r, !finished
	}

	free := scalar[int64](t, pool, `select queues.enqueue('free', '{}')`)
	other := scalar[int64](t, pool, `select queues.enqueue('lim.other', '{}')`)
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 5, "the claim was never seen asleep for its token while a claim beside it ran")
		done, r, ok := asleep("waiter")
		if !ok {
			require.NoError(t, r.err)
			releaseOf("waiter")
			continue
		}
		// Beside it: the unlimited task, the other limit's task; nothing of its own limit.
		got := claim(t, pool, "beside", 10, "5 minutes")
		select {
		case r = <-done:
			// The machine took longer than the sleep to run the claim beside it.
			require.NoError(t, r.err)
			releaseOf("waiter")
			releaseOf("beside")
			continue
		default:
		}
		gotIDs := []int64{}
		for _, g := range got {
			gotIDs = append(gotIDs, g.TaskID)
		}
		require.ElementsMatch(t, []int64{free, other}, gotIDs, "while it sleeps, other claims take what is theirs")
		r = <-done
		require.NoError(t, r.err)
		require.Len(t, r.ids, 1, "the waiting claim takes the token")
		require.Equal(t, "waiter", scalar[string](t, pool, `select worker_id from queues.task where task_id = $1`, r.ids[0]))
		require.GreaterOrEqual(t, scalar[float64](t, pool, `select tokens + internal.limit_slack(1) from queues.limit_bucket
			where task_type = 'lim.tok'`), -1e-9, "taken at or after the token's time")
		break
	}

	// Paused while it sleeps: it takes nothing.
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 5, "the claim was never seen asleep for its token")
		done, r, ok := asleep("paused")
		if !ok {
			require.NoError(t, r.err)
			releaseOf("paused")
			continue
		}
		mustExec(t, pool, `select queues.pause_queue('lim.tok')`)
		r = <-done
		require.NoError(t, r.err)
		if len(r.ids) > 0 {
			// It woke and claimed before the pause committed (a slow machine): only before it.
			require.True(t, scalar[bool](t, pool, `select claimed_at < (select paused_at from queues.queue_pause where task_type = 'lim.tok')
				from queues.task where task_id = $1`, r.ids[0]), "claimed after the pause")
			mustExec(t, pool, `select queues.resume_queue('lim.tok')`)
			releaseOf("paused")
			continue
		}
		break
	}
	require.True(t, scalar[bool](t, pool, `select queues.limit_wait() is null`),
		"a paused type is held by its pause: no worker waits for its token")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task
		where task_type = 'lim.tok' and claimed_at > (select paused_at from queues.queue_pause where task_type = 'lim.tok')`),
		"nothing claimed after the pause")
}

type rateWaitArgs struct{}

func (rateWaitArgs) TaskType() string { return "lim.rw" }

type rateFreeArgs struct{}

func (rateFreeArgs) TaskType() string { return "free.rw" }

// A worker's claim that waits in the database for a rate limit's token holds back none of its
// other types: with one slot, a backlog under 4 a second (so that the worker's claims nearly
// always wait for their token in the database, up to 250 ms) and tasks of an unlimited type
// enqueued one by one, such a task is claimed and started while every rate claim that was waiting
// when it was enqueued still waits. A claim that took the worker's room, or the one claim
// statement of both types, would have to come back first, every time. On a loaded machine a task
// often starts after the wait it was enqueued in has ended (1 of 10 did beside the whole suite
// and two CPU burners), so tasks are enqueued until one starts inside it, up to 100.
func TestRateWaitDoesNotHoldBackOtherTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: rateWaitArgs{}.TaskType(), RatePerSecond: 4, Burst: 1}))
	mustExec(t, pool, `select queues.enqueue('lim.rw', '{}') from generate_series(1, 500)`)
	// The rate claims waiting (backend and start) when the unlimited task was enqueued.
	waitingSQL := `select coalesce(array_agg(pid::text || '@' || query_start::text), '{}') from pg_stat_activity
		where datname = current_database() and state = 'active' and query like '%claim_limited_tasks_at_token%'
		  and query not like '%pg_stat_activity%'`
	var mu sync.Mutex
	var before []string
	beside := make(chan bool, 20)
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[rateWaitArgs]) error { return nil })
	taskorch.AddHandler(hs, func(ctx context.Context, _ *taskorch.TaskFor[rateFreeArgs]) error {
		var now []string
		if err := pool.QueryRow(ctx, waitingSQL).Scan(&now); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		all := len(before) > 0
		for _, b := range before {
			all = all && slices.Contains(now, b)
		}
		beside <- all
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, Concurrency: 1})
	require.Eventually(t, func() bool { return sleepingAtToken(t, pool) }, 30*time.Second, time.Millisecond,
		"the worker waits for its token in the database")

	seen, tries := 0, 0
	for seen == 0 && tries < 100 {
		tries++
		var b []string
		require.NoError(t, pool.QueryRow(ctx, waitingSQL).Scan(&b))
		mu.Lock()
		before = b
		mu.Unlock()
		r, err := c.Enqueue(ctx, rateFreeArgs{}, nil)
		require.NoError(t, err)
		waitStatus(t, pool, r.TaskID, taskorch.StatusCompleted)
		if <-beside {
			seen++
		}
	}
	require.Positive(t, seen, "no unlimited task of %d started while the rate claims waiting at its enqueue still waited", tries)
	t.Logf("try %d: an unlimited task started while every rate claim waiting at its enqueue still waited", tries)
	// And the rate held: no second of claimed_at over burst + rate (+ the slack, under one).
	require.LessOrEqual(t, scalar[int64](t, pool, `select coalesce(max(n), 0) from (
		select count(*) as n from queues.task a join queues.task b
		  on b.task_type = 'lim.rw' and b.claimed_at >= a.claimed_at and b.claimed_at < a.claimed_at + interval '1 second'
		where a.task_type = 'lim.rw' and a.claimed_at is not null group by a.task_id) w`), int64(5))
}

// queues.claim_limited_tasks_at_token called as the roles: an application role granted
// enqueueing may not call it (nor internal.next_limit_token); the worker's role is refused NULLs,
// blank names, a wait past a second, an infinite or negative wait and a lease that is not
// positive with 22023, and nothing is claimed.
func TestClaimAtTokenAsRoles(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := context.Background()
	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.roles", RatePerSecond: 5, Burst: 1}))
	mustExec(t, pool, `select queues.enqueue('lim.roles', '{}') from generate_series(1, 3)`)
	pending := func() int64 {
		return scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'lim.roles' and status = 'pending'`)
	}

	for _, sql := range []string{
		`select * from queues.claim_limited_tasks_at_token('w', 1)`,
		`select * from queues.claim_limited_tasks_at_token('w', 1000000, interval '5 minutes', array['lim.roles'], interval '1 second')`,
		`select * from internal.next_limit_token(array['lim.roles'], null, null)`,
	} {
		require.ErrorContains(t, probeAs(t, pool, app, sql), "permission denied", "the application role: %s", sql)
	}
	require.Equal(t, int64(3), pending(), "the application role claimed something")

	for _, sql := range []string{
		`select * from queues.claim_limited_tasks_at_token(null, 1)`,
		`select * from queues.claim_limited_tasks_at_token('', 1)`,
		`select * from queues.claim_limited_tasks_at_token('w', null)`,
		`select * from queues.claim_limited_tasks_at_token('w', -2147483648)`,
		`select * from queues.claim_limited_tasks_at_token('w', 1, null)`,
		`select * from queues.claim_limited_tasks_at_token('w', 1, interval '-5 minutes')`,
		`select * from queues.claim_limited_tasks_at_token('w', 1, interval '5 minutes', null, interval '1000000 days')`,
		`select * from queues.claim_limited_tasks_at_token('w', 1, interval '5 minutes', null, interval '-1 microsecond')`,
	} {
		requireSQLState(t, probeAs(t, pool, "worker_service_user", sql), "22023", ".", sql)
	}
	require.Equal(t, int64(3), pending(), "a refused call claimed something")
}
