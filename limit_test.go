package taskorch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Bad limits are refused with a clear error and write nothing; a type with no tasks may be
// limited; removing a limit that does not exist is ErrNotFound.
func TestSetLimitInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)

	for _, tc := range []struct {
		p    taskorch.LimitParams
		want string
	}{
		{taskorch.LimitParams{TaskType: "email"}, "give _max_running, _rate_per_second or both"},
		{taskorch.LimitParams{TaskType: "email", MaxRunning: -2}, "must not be negative"},
		{taskorch.LimitParams{TaskType: "email", RatePerSecond: -1}, "must not be negative"},
		{taskorch.LimitParams{TaskType: "email", MaxRunning: 1, Burst: 2}, "_burst needs _rate_per_second"},
		{taskorch.LimitParams{TaskType: "email", RatePerSecond: 2e6}, "at most 1000000"},
		{taskorch.LimitParams{TaskType: "email", RatePerSecond: 1, Burst: 2_000_000}, "_burst must be between 1 and 1000000"},
		{taskorch.LimitParams{TaskType: "email", MaxRunning: 1, KeyField: "a.b"}, `key field "a.b" is not a plain identifier`},
		{taskorch.LimitParams{TaskType: "email", MaxRunning: 1, KeyField: "x'; drop table queues.task; --"}, "is not a plain identifier"},
		{taskorch.LimitParams{TaskType: "bad type", MaxRunning: 1}, `task type "bad type" is not valid`},
		{taskorch.LimitParams{TaskType: "", MaxRunning: 1}, `is not valid`},
	} {
		err := c.SetLimit(ctx, &tc.p)
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, "%+v", tc.p)
		require.ErrorContains(t, err, tc.want, "%+v", tc.p)
	}
	require.ErrorIs(t, c.SetLimit(ctx, nil), taskorch.ErrInvalidInput)
	// A zero or negative limit straight in SQL, and a non-numeric rate, are refused too.
	for _, q := range []string{
		`select queues.set_limit('email', _max_running => 0)`,
		`select queues.set_limit('email', _rate_per_second => 0)`,
		`select queues.set_limit('email', _rate_per_second => 'NaN')`,
		`select queues.set_limit('email', _rate_per_second => 'abc')`,
	} {
		_, err := pool.Exec(ctx, q)
		require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrInvalidInput, q)
	}
	ls, err := c.Limits(ctx)
	require.NoError(t, err)
	require.Empty(t, ls, "nothing half-written")

	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "never.enqueued", MaxRunning: 3}))
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "email", RatePerSecond: 2.5, Burst: 4, KeyField: "account_id"}))
	ls, err = c.Limits(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	require.Equal(t, "email", ls[0].TaskType)
	require.InDelta(t, 2.5, ls[0].RatePerSecond, 0)
	require.Equal(t, 4, ls[0].Burst)
	require.Equal(t, "account_id", ls[0].KeyField)
	require.Equal(t, 3, ls[1].MaxRunning)
	require.Zero(t, ls[1].Burst, "no rate, no burst")

	require.NoError(t, c.RemoveLimit(ctx, "never.enqueued"))
	require.ErrorIs(t, c.RemoveLimit(ctx, "never.enqueued"), taskorch.ErrNotFound)

	// Tx twins: a limit set in a rolled-back transaction never existed.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, c.SetLimitTx(ctx, tx, &taskorch.LimitParams{TaskType: "in.tx", MaxRunning: 1}))
	inTx, err := c.LimitsTx(ctx, tx)
	require.NoError(t, err)
	require.Len(t, inTx, 2)
	require.NoError(t, tx.Rollback(ctx))
	ls, err = c.Limits(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 1)
}

// Concurrent claimers never overshoot max_running, and a task held back is claimed as soon as a
// slot frees.
func TestLimitMaxRunningConcurrentClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.a", MaxRunning: 3}))
	mustExec(t, pool, `select queues.enqueue('lim.a', '{}') from generate_series(1, 50)`)
	mustExec(t, pool, `select queues.enqueue('free', '{}') from generate_series(1, 20)`)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []claimed
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := claim(t, pool, fmt.Sprint("w", i), 10, "5 minutes")
			mu.Lock()
			got = append(got, cs...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	limited := 0
	for _, c := range got {
		if c.Type == "lim.a" {
			limited++
		}
	}
	require.Equal(t, 3, limited, "exactly the limit")
	require.Equal(t, int64(3), scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'lim.a' and status = 'running'`))
	// A claim locks up to its size of unlimited tasks before it knows how many limited ones it
	// takes; those it drops stay locked until it commits, so a claimer racing it may skip them.
	// The next claim takes them.
	claim(t, pool, "w8", 30, "5 minutes")
	require.Equal(t, int64(20), scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'free' and status = 'running'`),
		"unlimited tasks are claimed as before")
	require.Equal(t, int64(3), scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'lim.a' and status = 'running'`))

	// Nothing more while the slots are taken; one slot frees, one task is claimed.
	require.Empty(t, claim(t, pool, "w9", 10, "5 minutes"))
	var id, lease int64
	require.NoError(t, pool.QueryRow(ctx, `select task_id, lease_id from queues.task where task_type = 'lim.a' and status = 'running' limit 1`).Scan(&id, &lease))
	mustExec(t, pool, `select queues.complete_task($1, $2)`, id, lease)
	again := claim(t, pool, "w9", 10, "5 minutes")
	require.Len(t, again, 1)
	require.Equal(t, "lim.a", again[0].Type)
}

// Per key: each value of the key field has its own slots; a payload whose field is missing or
// not a scalar counts in the null-key bucket, which is limited like any key; claims rotate
// across keys, fewest running first.
func TestLimitPerKeyBuckets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.k", MaxRunning: 2, KeyField: "tenant"}))
	// Tenant a's tasks all come first: without rotation a claim would take a, a.
	for _, p := range []string{
		`{"tenant": "a"}`, `{"tenant": "a"}`, `{"tenant": "a"}`, `{"tenant": "a"}`,
		`{"tenant": "b"}`, `{"tenant": "b"}`, `{"tenant": "b"}`,
		`{"tenant": 7}`, `{}`, `{"tenant": null}`, `{"tenant": {"x": 1}}`, `{"tenant": [1]}`,
	} {
		mustExec(t, pool, `select queues.enqueue('lim.k', $1::jsonb)`, p)
	}
	first := claim(t, pool, "w1", 3, "5 minutes")
	require.Len(t, first, 3)
	tenants := func(cs []claimed) []string {
		var out []string
		for _, c := range cs {
			out = append(out, scalar[string](t, pool, `select coalesce(payload->>'tenant', '-') from queues.task where task_id = $1`, c.TaskID))
		}
		return out
	}
	// Keys in key order ('*' the null-key bucket, then '=7', '=a', '=b'): one per key.
	require.ElementsMatch(t, []string{"-", "7", "a"}, tenants(first), "one per key, in key order")

	rest := claim(t, pool, "w2", 20, "5 minutes")
	// a: 1 more, b: 2, 7: nothing more waiting, null-key bucket: 1 more of its 4.
	require.Len(t, rest, 4)
	us, err := c.LimitUsage(ctx)
	require.NoError(t, err)
	byKey := map[string]taskorch.LimitUsage{}
	for _, u := range us {
		k := u.Key
		if u.NullKey {
			k = "(null)"
		}
		byKey[k] = u
	}
	require.Equal(t, int64(2), byKey["a"].Running)
	require.Equal(t, int64(2), byKey["a"].Held)
	require.Equal(t, int64(2), byKey["b"].Running)
	require.Equal(t, int64(1), byKey["b"].Held)
	require.Equal(t, int64(1), byKey["7"].Running)
	require.Equal(t, int64(2), byKey["(null)"].Running)
	require.Equal(t, int64(2), byKey["(null)"].Held)
	require.Empty(t, claim(t, pool, "w3", 20, "5 minutes"))
}

// A rate limit hands out at most its burst at once and then one task per interval, across
// claimers; limit_wait says how long until the next token.
func TestLimitRateTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.r", RatePerSecond: 1, Burst: 3}))
	mustExec(t, pool, `select queues.enqueue('lim.r', '{}') from generate_series(1, 10)`)
	require.Len(t, claim(t, pool, "w1", 10, "5 minutes"), 3, "the burst")
	require.Empty(t, claim(t, pool, "w2", 10, "5 minutes"), "no token left")
	// An empty bucket that has just refilled (set on its clock, rather than relying on how fast
	// the claims above ran on a busy machine): the next token is about a second away.
	mustExec(t, pool, `update queues.limit_bucket set tokens = 0, refilled_at = now()`)
	wait := scalar[float64](t, pool, `select queues.limit_wait()`)
	require.Greater(t, wait, 0.5)
	require.LessOrEqual(t, wait, 1.0)
	// A second later (on the bucket's clock, moved back instead of sleeping), one more.
	mustExec(t, pool, `update queues.limit_bucket set refilled_at = refilled_at - interval '1.05 seconds'`)
	require.Len(t, claim(t, pool, "w2", 10, "5 minutes"), 1)
	require.Empty(t, claim(t, pool, "w2", 10, "5 minutes"))

	// Removing the limit frees its tasks at once.
	require.NoError(t, c.RemoveLimit(ctx, "lim.r"))
	require.Len(t, claim(t, pool, "w3", 10, "5 minutes"), 6)
	require.Equal(t, int64(0), scalar[int64](t, pool, `select count(*) from queues.limit_bucket`))
	require.True(t, scalar[bool](t, pool, `select queues.limit_wait() is null`))
}

// A claim that reached the bucket just before its token came is told to claim again at once
// (a millisecond: with a burst of 1 every moment the token waits is lost); a token that has been
// there for a quarter of the interval (another claim is taking it, or something else holds the
// tasks) is asked about again only after that quarter, so no worker spins on it.
func TestLimitWaitFreshToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	// One token every 10 s: a quarter of the interval (2.5 s) is far longer than a starved
	// machine takes between the statements below.
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.f", RatePerSecond: 0.1, Burst: 1}))
	mustExec(t, pool, `select queues.enqueue('lim.f', '{}') from generate_series(1, 5)`)
	require.Len(t, claim(t, pool, "w1", 10, "5 minutes"), 1, "the burst")
	// On the bucket's clock: empty at refilled_at, so the token came about 10 s after it.
	for _, tc := range []struct {
		ago  string
		want float64
	}{
		{"10 seconds", 0.001}, // the token came just now: claim again at once
		{"15 seconds", 2.5},   // it has been there 5 s: a quarter of the interval
	} {
		mustExec(t, pool, `update queues.limit_bucket set tokens = 0, refilled_at = clock_timestamp() - $1::interval`, tc.ago)
		require.InDelta(t, tc.want, scalar[float64](t, pool, `select queues.limit_wait()`), 1e-9, "empty bucket refilled %s ago", tc.ago)
	}
	mustExec(t, pool, `update queues.limit_bucket set tokens = 0, refilled_at = clock_timestamp()`)
	wait := scalar[float64](t, pool, `select queues.limit_wait()`)
	require.Greater(t, wait, 5.0, "no token yet: the time until it")
	require.LessOrEqual(t, wait, 10.0)
}

// Tasks enqueued before a limit is set, and a dead task retried by hand after, count under it;
// the transports' claim by id keeps limits too.
func TestLimitCoversExistingRetriedAndByID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, `select queues.enqueue('lim.b', '{}') from generate_series(1, 5)`)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.b", MaxRunning: 2}))
	ids := scalar[[]int64](t, pool, `select array_agg(task_id order by task_id) from queues.task where task_type = 'lim.b'`)
	byID := func() int {
		return int(scalar[int64](t, pool, `select count(*) from queues.claim_tasks_by_id('wb', $1)`, ids))
	}
	require.Equal(t, 2, byID())
	require.Equal(t, 0, byID(), "by id, the limit holds too")
	require.Empty(t, claim(t, pool, "w", 10, "5 minutes"))

	// A dead task of the type, retried by hand, waits for a slot as well.
	mustExec(t, pool, `select queues.remove_limit('lim.b')`)
	dead := scalar[int64](t, pool, `select queues.enqueue('lim.b', '{}', _max_attempts => 1)`)
	var lease int64
	require.NoError(t, pool.QueryRow(ctx, `select lease_id from queues.claim_tasks_by_id('w', array[$1::bigint])`, dead).Scan(&lease))
	mustExec(t, pool, `select queues.fail_task($1, 'boom', $2)`, dead, lease)
	require.Equal(t, "dead", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, dead))
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.b", MaxRunning: 2}))
	_, err := c.Retry(ctx, dead)
	require.NoError(t, err)
	require.Equal(t, "", scalar[string](t, pool, `select limit_key from queues.task where task_id = $1`, dead))
	require.Empty(t, claim(t, pool, "w", 10, "5 minutes"), "2 running already")
}

// A limit named db_function:<schema.function> holds that function's db_function tasks only:
// one billing.close_month at a time while the other functions run freely, and they do not count
// under a limit of db_function itself. A name that is not a function is refused.
func TestLimitOneDBFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "db_function:billing.close_month", MaxRunning: 1}))
	// A task may name only a function that exists (docs/security.md).
	mustExec(t, pool, `create schema billing; create schema reports;
		create function billing.close_month(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		create function billing.other(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		create function reports.daily(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;`)
	for _, fn := range []string{"billing.close_month", "billing.close_month", "billing.close_month", "billing.other", "reports.daily", "reports.daily"} {
		mustExec(t, pool, `select queues.enqueue('db_function', jsonb_build_object('db_function', $1::text))`, fn)
	}
	functions := func(cs []claimed) map[string]int {
		out := map[string]int{}
		for _, c := range cs {
			out[scalar[string](t, pool, `select payload->>'db_function' from queues.task where task_id = $1`, c.TaskID)]++
		}
		return out
	}
	require.Equal(t, map[string]int{"billing.close_month": 1, "billing.other": 1, "reports.daily": 2},
		functions(claim(t, pool, "w", 10, "5 minutes")))
	require.Empty(t, claim(t, pool, "w", 10, "5 minutes"), "the other two wait for the one running")

	// A limit on db_function as a whole leaves the function's own limit in charge of its tasks.
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "db_function", MaxRunning: 100}))
	require.Empty(t, claim(t, pool, "w", 10, "5 minutes"))
	require.Equal(t, int64(1), scalar[int64](t, pool, `select running from queues.limit_status where task_type = 'db_function:billing.close_month'`))
	require.Equal(t, int64(3), scalar[int64](t, pool, `select running from queues.limit_status where task_type = 'db_function'`))

	// Removing the function's limit puts its tasks under db_function's.
	require.NoError(t, c.RemoveLimit(ctx, "db_function:billing.close_month"))
	require.Equal(t, map[string]int{"billing.close_month": 2}, functions(claim(t, pool, "w", 10, "5 minutes")))

	for _, name := range []string{"db_function:Billing.close", "db_function:close_month", "db_function:a.b.c", "db_function:"} {
		err := c.SetLimit(ctx, &taskorch.LimitParams{TaskType: name, MaxRunning: 1})
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, name)
	}
}

// A claim looks at a bounded window of keys, from a cursor that moves on: successive small
// claims over many keys reach every key, and each key runs one task at a time.
func TestLimitKeysRotate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.many", MaxRunning: 1, KeyField: "k"}))
	mustExec(t, pool, `select queues.enqueue('lim.many', jsonb_build_object('k', i % 100)) from generate_series(0, 199) i`)
	seen := map[string]int{}
	for range 100 {
		got := claim(t, pool, "w", 5, "5 minutes")
		if len(got) == 0 {
			break
		}
		for _, cl := range got {
			seen[scalar[string](t, pool, `select payload->>'k' from queues.task where task_id = $1`, cl.TaskID)]++
		}
	}
	require.Len(t, seen, 100, "every key reached")
	for k, n := range seen {
		require.Equal(t, 1, n, "key %s: one running at a time", k)
	}
	require.Empty(t, claim(t, pool, "w", 5, "5 minutes"))
}

// Claims rotate across keys even when every task finishes before the next claim (so no key
// has a task running to rank it behind the others): a claim of 2 at a time over 5 keys whose
// tasks were enqueued key after key reaches every key within 3 claims.
func TestLimitKeysRotateWhenIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	require.NoError(t, c.SetLimit(ctx, &taskorch.LimitParams{TaskType: "lim.idle", MaxRunning: 2, KeyField: "acct"}))
	mustExec(t, pool, `select queues.enqueue('lim.idle', jsonb_build_object('acct', 'acct-' || (i / 10))) from generate_series(0, 49) i order by i`)
	seen := map[string]bool{}
	for range 3 {
		for _, cl := range claim(t, pool, "w", 2, "5 minutes") {
			var acct string
			var lease int64
			require.NoError(t, pool.QueryRow(ctx, `select payload->>'acct', lease_id from queues.task where task_id = $1`, cl.TaskID).Scan(&acct, &lease))
			seen[acct] = true
			mustExec(t, pool, `select queues.complete_task($1, $2)`, cl.TaskID, lease)
		}
	}
	require.Len(t, seen, 5, "every key within 3 claims of 2, though each finished before the next")
}

// A task a limit governs is written once, with its limit and bucket, by each enqueue function
// (docs/limits.md): an enqueue in a transaction counts as many inserts and no update of
// queues.task (pg_stat_xact_user_tables, read before and after). Unlimited tasks beside
// them get neither; a task inserted another way (a debounced enqueue) gets its limit from the
// statement trigger, as before.
func TestLimitedTaskWrittenOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := newClient(t)
	mustExec(t, pool, `select queues.set_limit('tenant_job', _max_running => 1, _key_field => 'tenant')`)
	mustExec(t, pool, `select queues.set_limit('whole_type', _max_running => 2)`)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// Read before and after: the view also holds the connection's earlier transactions' counts
	// until they are reported.
	var ins0, upd0 int64
	require.NoError(t, tx.QueryRow(ctx, `select n_tup_ins, n_tup_upd from pg_stat_xact_user_tables
		where relid = 'queues.task'::regclass`).Scan(&ins0, &upd0))
	one := scalar[int64](t, tx, `select queues.enqueue('tenant_job', '{"tenant": "acme"}')`)
	keyed := scalar[int64](t, tx, `select queues.enqueue('tenant_job', '{"tenant": 7}', _idempotency_key => 'k1')`)
	many := scalar[[]int64](t, tx, `select queues.enqueue_many(array['tenant_job', 'whole_type', 'free'],
		array['{"tenant": "acme"}', '{}', '{"tenant": "acme"}']::jsonb[])`)
	manyKeyed := scalar[[]int64](t, tx, `select queues.enqueue_many(array['tenant_job', 'free'],
		array['{"tenant": {"nested": 1}}', '{}']::jsonb[], _idempotency_keys => array['k2', 'k3'])`)
	require.Len(t, many, 3)
	require.Len(t, manyKeyed, 2)
	var ins, upd int64
	require.NoError(t, tx.QueryRow(ctx, `select n_tup_ins, n_tup_upd from pg_stat_xact_user_tables
		where relid = 'queues.task'::regclass`).Scan(&ins, &upd))
	require.Equal(t, int64(7), ins-ins0)
	require.Equal(t, upd0, upd, "each task written once")

	limitOf := func(id int64) string {
		return scalar[string](t, tx, `select coalesce(limit_name, '-') || ' ' || coalesce(limit_key, '-') from queues.task where task_id = $1`, id)
	}
	require.Equal(t, "tenant_job =acme", limitOf(one))
	require.Equal(t, "tenant_job =7", limitOf(keyed))
	require.Equal(t, "tenant_job =acme", limitOf(many[0]))
	require.Equal(t, "whole_type ", limitOf(many[1]))
	require.Equal(t, "- -", limitOf(many[2]))
	require.Equal(t, "tenant_job *", limitOf(manyKeyed[0]))
	require.Equal(t, "- -", limitOf(manyKeyed[1]))

	// Another way in: the trigger gives the task its limit.
	mustExec(t, tx, `set local session_replication_role = replica`) // no trigger, as in a restore
	byHand := scalar[int64](t, tx, `insert into queues.task (task_type, payload) values ('tenant_job', '{"tenant": "zed"}') returning task_id`)
	mustExec(t, tx, `set local session_replication_role = origin`)
	require.Equal(t, "- -", limitOf(byHand))
	byHand = scalar[int64](t, tx, `insert into queues.task (task_type, payload) values ('tenant_job', '{"tenant": "zed"}') returning task_id`)
	require.Equal(t, "tenant_job =zed", limitOf(byHand))
}

// The other enqueue paths write a governed task once too: a debounced enqueue (and its enqueue
// again, which moves the task to the new payload's bucket in the same update), a schedule's task
// and a supervisor's tick (pg_stat_xact_user_tables counts each statement's inserts and updates
// of queues.task in the transaction).
func TestLimitedTaskWrittenOnceEveryWayIn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := newClient(t)
	mustExec(t, pool, `select queues.set_limit('tenant_job', _max_running => 1, _key_field => 'tenant')`)
	mustExec(t, pool, `create function public.limited_sup(jsonb) returns void language sql as 'select'`)
	mustExec(t, pool, `select queues.set_limit('db_function:public.limited_sup', _max_running => 1)`)
	mustExec(t, pool, `select queues.add_schedule('limited_sched', '0 3 * * *', 'tenant_job', '{"tenant": "sched"}')`)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	writes := func() (ins, upd int64) {
		require.NoError(t, tx.QueryRow(ctx, `select n_tup_ins, n_tup_upd from pg_stat_xact_user_tables
			where relid = 'queues.task'::regclass`).Scan(&ins, &upd))
		return ins, upd
	}
	limitOf := func(id int64) string {
		return scalar[string](t, tx, `select coalesce(limit_name, '-') || ' ' || coalesce(limit_key, '-') from queues.task where task_id = $1`, id)
	}
	step := func(what string, wantIns, wantUpd int64, sql string, args ...any) int64 {
		ins0, upd0 := writes()
		id := scalar[int64](t, tx, sql, args...)
		ins, upd := writes()
		require.Equal(t, wantIns, ins-ins0, "%s: inserts", what)
		require.Equal(t, wantUpd, upd-upd0, "%s: updates", what)
		return id
	}

	d := step("debounced", 1, 0, `select task_id from queues.enqueue_debounced('tenant_job', '{"tenant": "zed"}', 'd1', interval '1 hour')`)
	require.Equal(t, "tenant_job =zed", limitOf(d))
	again := step("debounced again, another tenant", 0, 1,
		`select task_id from queues.enqueue_debounced('tenant_job', '{"tenant": "amy"}', 'd1', interval '1 hour')`)
	require.Equal(t, d, again)
	require.Equal(t, "tenant_job =amy", limitOf(d), "the new payload's bucket")
	free := step("debounced, no limit", 1, 0, `select task_id from queues.enqueue_debounced('free', '{"tenant": "zed"}', 'd2', interval '1 hour')`)
	require.Equal(t, "- -", limitOf(free))

	s := step("schedule", 1, 0, `select queues.run_schedule_now('limited_sched')`)
	require.Equal(t, "tenant_job =sched", limitOf(s))

	ins0, upd0 := writes()
	mustExec(t, tx, `select queues.wake_supervisor('public.limited_sup', now() + interval '1 hour')`)
	ins, upd := writes()
	require.Equal(t, [2]int64{1, 0}, [2]int64{ins - ins0, upd - upd0}, "supervisor tick: inserts, updates")
	tick := scalar[int64](t, tx, `select task_id from queues.task where payload ->> 'db_function' = 'public.limited_sup'`)
	require.Equal(t, "db_function:public.limited_sup ", limitOf(tick))
}

// With limits set, an application role granted enqueueing (queues.grant_enqueue) gets its tasks
// limited and bucketed by the enqueue functions, and what a careless or hostile caller sends is
// refused as before, with nothing written: NULL or non-object payloads, an infinite schedule,
// a zero max_attempts, arrays of different lengths. A key field holding an object, an array, a
// NULL or a 100,000-character string is a bucket like any other ('*' for the first three), and
// the role cannot set a task's limit columns itself: it may not insert into queues.task.
func TestLimitedEnqueueAsAppRoleHostileInput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := newClient(t)
	app := "app_" + randomHex(t, 6)
	mustExec(t, pool, "create role "+pgx.Identifier{app}.Sanitize()+" nologin")
	t.Cleanup(func() {
		mustExec(t, pool, "drop owned by "+pgx.Identifier{app}.Sanitize()+"; drop role "+pgx.Identifier{app}.Sanitize())
	})
	mustExec(t, pool, `select queues.grant_enqueue($1)`, app)
	mustExec(t, pool, `select queues.set_limit('tenant_job', _max_running => 1, _key_field => 'tenant')`)
	count := func() int { return scalar[int](t, pool, `select count(*)::int from queues.task`) }

	for _, sql := range []string{
		`select queues.enqueue('tenant_job', null)`,
		`select queues.enqueue('tenant_job', '[1]')`,
		`select queues.enqueue('tenant_job', '{"tenant": 1}', _scheduled_at => 'infinity')`,
		`select queues.enqueue('tenant_job', '{"tenant": 1}', _max_attempts => 0)`,
		`select queues.enqueue_many(array['tenant_job', 'tenant_job'], array['{"tenant": 1}', null]::jsonb[])`,
		`select queues.enqueue_many(array['tenant_job'], array['{"tenant": 1}', '{}']::jsonb[])`,
		`select queues.enqueue_many(array['tenant_job'], array['{"tenant": 1}']::jsonb[], _scheduled_ats => array['-infinity'::timestamptz])`,
	} {
		var id any
		err := asRoleScalar(t, pool, app, sql, &id)
		requireSQLState(t, err, "22023", ".", sql)
	}
	require.Zero(t, count(), "a refused enqueue wrote something")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	mustExec(t, tx, `set local role `+pgx.Identifier{app}.Sanitize())
	huge := strings.Repeat("x", 100_000)
	ids := scalar[[]int64](t, tx, `select queues.enqueue_many(array['tenant_job', 'tenant_job', 'tenant_job', 'tenant_job'],
		array['{"tenant": {"a": 1}}', '{"tenant": [1]}', '{"tenant": null}', jsonb_build_object('tenant', $1::text)])`, huge)
	one := scalar[int64](t, tx, `select queues.enqueue('tenant_job', '{"tenant": "acme"}')`)
	_, err = tx.Exec(ctx, `savepoint s`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `insert into queues.task (task_type, payload, limit_name, limit_key) values ('tenant_job', '{}', 'other', '=x')`)
	requireSQLState(t, err, "42501", "permission denied", "direct insert")
	_, err = tx.Exec(ctx, `rollback to savepoint s`)
	require.NoError(t, err)
	mustExec(t, tx, `reset role`)
	buckets := scalar[[]string](t, tx, `select array_agg(limit_name || ' ' || left(limit_key, 3) order by task_id) from queues.task where task_id = any ($1)`,
		append(ids, one))
	require.Equal(t, []string{"tenant_job *", "tenant_job *", "tenant_job *", "tenant_job =xx", "tenant_job =ac"}, buckets)
	require.Equal(t, 100_001, scalar[int](t, tx, `select length(limit_key) from queues.task where task_id = $1`, ids[3]))

	// A debounced enqueue (its limit written with its insert, core/0110): refused as before,
	// nothing written; odd key values bucketed; enqueued again, the task moves to the new bucket.
	mustExec(t, tx, `set local role `+pgx.Identifier{app}.Sanitize())
	for _, sql := range []string{
		`select task_id from queues.enqueue_debounced('tenant_job', null, 'd', interval '1 minute')`,
		`select task_id from queues.enqueue_debounced('tenant_job', '[1]', 'd', interval '1 minute')`,
		`select task_id from queues.enqueue_debounced('tenant_job', '{"tenant": 1}', null, interval '1 minute')`,
		`select task_id from queues.enqueue_debounced('tenant_job', '{"tenant": 1}', 'd', interval '-1 minute')`,
		`select task_id from queues.enqueue_debounced('tenant_job', '{"tenant": 1}', 'tick:x', interval '1 minute')`,
		`select task_id from queues.enqueue_debounced('db_function:public.x', '{}', 'd', interval '1 minute')`,
	} {
		_, err := tx.Exec(ctx, `savepoint s`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sql)
		requireSQLState(t, err, "22023", ".", sql)
		_, err = tx.Exec(ctx, `rollback to savepoint s`)
		require.NoError(t, err)
	}
	d := scalar[int64](t, tx, `select task_id from queues.enqueue_debounced('tenant_job', '{"tenant": {"a": 1}}', 'd', interval '1 minute')`)
	again := scalar[int64](t, tx, `select task_id from queues.enqueue_debounced('tenant_job', jsonb_build_object('tenant', $1::text), 'd', interval '1 minute')`, huge)
	require.Equal(t, d, again)
	mustExec(t, tx, `reset role`)
	require.Equal(t, "tenant_job =xx", scalar[string](t, tx, `select limit_name || ' ' || left(limit_key, 3) from queues.task where task_id = $1`, d))
	require.Equal(t, 6, scalar[int](t, tx, `select count(*)::int from queues.task`), "the five above and the debounced one")
}
