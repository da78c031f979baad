package taskorch_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The SQLSTATEs internal.run_function refuses with (migrations/core/functions/internal/run_function.sql).
const (
	codeInvalidParameter = "22023"
	codeUndefinedFunc    = "42883"
	codeNoPrivilege      = "42501"
)

// runFunctionBizSQL creates the business functions the tests call, as the schema owner would: a schema
// biz with granted, ungranted and wrongly shaped functions, and a schema hidden without USAGE.
const runFunctionBizSQL = `
create schema biz;
create table biz.account (account_id int primary key, name text not null);
insert into biz.account values (1, 'alice');
create table biz.secret_log (note text not null);     -- written by biz.secret: proves whether it ran
create table biz.canary (n int not null);              -- injections must not touch it
insert into biz.canary values (42);
create table public.x (n int);                         -- the table an injection tries to drop

-- granted: returns the whole payload in a status envelope
create function biz.ok(jsonb) returns jsonb
language sql security definer set search_path = pg_catalog, pg_temp as
$$ select jsonb_build_object('status', 'succeeded', 'payload', $1) $$;

-- granted: writes a table the worker cannot touch directly (security definer at work)
create function biz.rename(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    update biz.account set name = _p->>'name' where account_id = (_p->>'account_id')::int;
    return jsonb_build_object('success', found);
end $$;

-- not granted
create function biz.secret(jsonb) returns jsonb
language sql security definer set search_path = pg_catalog, pg_temp as
$$ insert into biz.secret_log values ('secret ran'); select '{"status": "succeeded"}'::jsonb $$;

-- granted, but the wrong shape
create function biz.wrong(text) returns jsonb language sql as $$ select '{}'::jsonb $$;
create function biz.two(jsonb, int) returns jsonb language sql as $$ select '{}'::jsonb $$;
create function biz.int_ret(jsonb) returns int language sql as $$ select 1 $$;
create function biz.set_ret(jsonb) returns setof jsonb language sql as $$ select $1 $$;
create procedure biz.proc(jsonb) language sql as $$ select 1 $$;

-- granted, security invoker: runs with the caller's rights, which include no table
create function biz.peek(jsonb) returns jsonb
language sql security invoker set search_path = pg_catalog, pg_temp as
$$ select jsonb_build_object('status', 'succeeded', 'payload', (select count(*) from biz.account)) $$;

-- granted: uses now(), which a search_path hijack would redirect
create function biz.clock(jsonb) returns jsonb
language sql security definer set search_path = pg_catalog, pg_temp as
$$ select jsonb_build_object('status', 'succeeded', 'payload', extract(year from now())::int) $$;

-- EXECUTE granted, but no USAGE on the schema
create schema hidden;
create function hidden.ok(jsonb) returns jsonb language sql as $$ select '{"status": "succeeded"}'::jsonb $$;

-- Functions are executable by PUBLIC unless revoked: business functions must revoke it.
revoke all on all functions in schema biz, hidden from public;
grant usage on schema biz to worker_service_user;
grant execute on function
    biz.ok(jsonb), biz.rename(jsonb), biz.wrong(text), biz.two(jsonb, int), biz.int_ret(jsonb),
    biz.set_ret(jsonb), biz.peek(jsonb), biz.clock(jsonb), hidden.ok(jsonb)
  to worker_service_user;
grant execute on procedure biz.proc(jsonb) to worker_service_user;
`

// newRunFunctionDB returns a migrated database with runFunctionBizSQL applied, as its owner, and a pool
// logged in as a new login role that holds only worker_service_user.
func newRunFunctionDB(t *testing.T) (admin, worker *pgxpool.Pool, workerRole string) {
	t.Helper()
	admin = dbtest.NewDB(t)
	mustExec(t, admin, runFunctionBizSQL)
	worker, workerRole = newLoginRole(t, admin, "tw", "grant worker_service_user to %s")
	return admin, worker, workerRole
}

// newLoginRole creates a login role for this test (roles are cluster-wide, so its name is
// random), runs each of grants with the role's quoted name for %s, and returns a pool logged in
// as the role. The role is dropped when the test ends. It has a password, so this works with
// password authentication as well as with the harness's own trust-authenticated cluster.
func newLoginRole(t *testing.T, admin *pgxpool.Pool, prefix string, grants ...string) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	name := prefix + "_" + randomHex(t, 6)
	password := randomHex(t, 16)
	quoted := pgx.Identifier{name}.Sanitize()
	mustExec(t, admin, fmt.Sprintf("create role %s login password '%s'", quoted, password))
	t.Cleanup(func() {
		// Objects and privileges the role holds in this database (e.g. an attacker's schema),
		// then the role itself, before the harness drops the database.
		_, err := admin.Exec(ctx, "drop owned by "+quoted)
		require.NoError(t, err)
		_, err = admin.Exec(ctx, "drop role "+quoted)
		require.NoError(t, err)
	})
	for _, g := range grants {
		mustExec(t, admin, fmt.Sprintf(g, quoted))
	}

	cfg := admin.Config().Copy()
	cfg.ConnConfig.User = name
	cfg.ConnConfig.Password = password
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close) // before the role is dropped
	require.Equal(t, name, scalar[string](t, pool, `select current_user`))
	return pool, name
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// requirePgError requires err to be a PostgreSQL error with SQLSTATE code and returns it.
func requirePgError(t testing.TB, err error, code string, label string) *pgconn.PgError {
	t.Helper()
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe, label)
	require.Equal(t, code, pe.Code, label+": "+pe.Message)
	return pe
}

// runFunction calls internal.run_function; a nil payload is SQL NULL.
func runFunction(ctx context.Context, db *pgxpool.Pool, name any, payload any) (string, error) {
	var out *string
	err := db.QueryRow(ctx, `select internal.run_function($1::text, $2::text::jsonb)::text`, name, payload).Scan(&out)
	if out == nil {
		return "", err
	}
	return *out, err
}

// The worker's login user, holding only worker_service_user, runs a granted business function
// through the runner and gets the whole payload to it; a security definer function does for it
// what it may not do itself.
func TestRunFunctionRunsGrantedFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, worker, role := newRunFunctionDB(t)

	require.Equal(t, []string{"worker_service_user"}, scalar[[]string](t, worker,
		`select array_agg(r.rolname::text order by r.rolname) from pg_auth_members m
		 join pg_roles r on r.oid = m.roleid where m.member = (select oid from pg_roles where rolname = current_user)`),
		"the worker's login user holds worker_service_user and nothing else")
	require.Equal(t, role, scalar[string](t, worker, `select current_user`))

	payload := `{"task_type": "db_function", "db_function": "biz.ok", "n": 1.5, "s": "é \"q\" \\ '); --",
		"nested": {"list": [1, null, true, {"deep": "x"}]}, "empty": {}}`
	got, err := runFunction(ctx, worker, "biz.ok", payload)
	require.NoError(t, err)
	require.JSONEq(t, `{"status": "succeeded", "payload": `+payload+`}`, got)

	got, err = runFunction(ctx, worker, "biz.rename", `{"account_id": 1, "name": "bob"}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"success": true}`, got)
	require.Equal(t, "bob", scalar[string](t, admin, `select name from biz.account where account_id = 1`))

	// The name is resolved whatever the caller's search_path says.
	conn, err := worker.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `set search_path = hidden, public`)
	require.NoError(t, err)
	var viaConn string
	require.NoError(t, conn.QueryRow(ctx, `select internal.run_function('biz.ok', '{"a": 1}')::text`).Scan(&viaConn))
	require.JSONEq(t, `{"status": "succeeded", "payload": {"a": 1}}`, viaConn)
	_, err = conn.Exec(ctx, `reset search_path`)
	require.NoError(t, err)
}

// Every refusal has its own SQLSTATE and a message that says what is wrong and what to do.
func TestRunFunctionRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, worker, role := newRunFunctionDB(t)
	obj := `{"a": 1}`

	for _, tt := range []struct {
		name    string
		fn      any // nil: SQL NULL
		payload any // nil: SQL NULL
		code    string
		msg     string
	}{
		{"null name", nil, obj, codeInvalidParameter, `run_function: function name must not be empty`},
		{"empty name", "", obj, codeInvalidParameter, `run_function: function name must not be empty`},
		{"malformed name", "biz.ok(jsonb)", obj, codeInvalidParameter,
			`run_function: function name "biz.ok(jsonb)" is malformed: expected schema.name, two lowercase SQL identifiers ([a-z_][a-z0-9_$]*, at most 63 characters each) without quotes, spaces or arguments`},
		{"unqualified name", "ok", obj, codeInvalidParameter, `function name "ok" is malformed`},
		{"null payload", "biz.ok", nil, codeInvalidParameter, `run_function: payload for biz.ok must be a JSON object, got null`},
		{"array payload", "biz.ok", `[{"a": 1}]`, codeInvalidParameter, `run_function: payload for biz.ok must be a JSON object, got array`},
		{"scalar payload", "biz.ok", `"x"`, codeInvalidParameter, `run_function: payload for biz.ok must be a JSON object, got string`},
		{"JSON null payload", "biz.ok", `null`, codeInvalidParameter, `run_function: payload for biz.ok must be a JSON object, got null`},
		{"no such schema", "nosuch.ok", obj, codeUndefinedFunc,
			`run_function: function nosuch.ok(jsonb) does not exist: there is no schema nosuch`},
		{"no such function", "biz.nope", obj, codeUndefinedFunc, `run_function: function biz.nope(jsonb) does not exist`},
		{"takes text", "biz.wrong", obj, codeUndefinedFunc,
			`run_function: function biz.wrong(jsonb) does not exist (found biz.wrong(text); the runner calls only functions taking exactly one jsonb argument)`},
		{"takes two arguments", "biz.two", obj, codeUndefinedFunc,
			`run_function: function biz.two(jsonb) does not exist (found biz.two(jsonb,integer); the runner calls only functions taking exactly one jsonb argument)`},
		{"not granted", "biz.secret", obj, codeNoPrivilege,
			fmt.Sprintf(`run_function: permission denied for function biz.secret(jsonb): role %s has no EXECUTE on it (grant execute on function biz.secret(jsonb) to worker_service_user)`, role)},
		{"no usage on schema", "hidden.ok", obj, codeNoPrivilege,
			fmt.Sprintf(`run_function: permission denied for schema hidden: role %s has no USAGE on it (grant usage on schema hidden to worker_service_user)`, role)},
		{"system schema", "pg_catalog.pg_sleep", obj, codeNoPrivilege,
			`run_function: pg_catalog.pg_sleep is in the system schema pg_catalog; the runner calls application functions only`},
		{"returns int", "biz.int_ret", obj, codeInvalidParameter, `run_function: biz.int_ret(jsonb) returns integer, not jsonb`},
		{"returns a set", "biz.set_ret", obj, codeInvalidParameter, `run_function: biz.set_ret(jsonb) returns setof jsonb, not jsonb`},
		{"a procedure", "biz.proc", obj, codeInvalidParameter,
			`run_function: biz.proc(jsonb) is a procedure and cannot be run; the runner calls functions returning jsonb`},
	} {
		_, err := runFunction(ctx, worker, tt.fn, tt.payload)
		pe := requirePgError(t, err, tt.code, tt.name)
		require.Contains(t, pe.Message, tt.msg, tt.name)
	}

	// The runner adds no privilege: a security invoker function runs with the worker's own
	// rights, which include no table.
	_, err := runFunction(ctx, worker, "biz.peek", obj)
	pe := requirePgError(t, err, codeNoPrivilege, "biz.peek")
	require.Equal(t, "permission denied for table account", pe.Message)

	require.Zero(t, scalar[int](t, admin, `select count(*) from biz.secret_log`), "biz.secret never ran")
}

// Names built to break out of the call are refused before anything runs, and nothing changes.
func TestRunFunctionRefusesInjection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, worker, _ := newRunFunctionDB(t)

	const objects = `select (select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace
	                         where n.nspname in ('biz', 'public', 'queues', 'internal'))
	                      + (select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace
	                         where n.nspname in ('biz', 'public', 'queues', 'internal'))`
	before := scalar[int](t, admin, objects)

	long := "biz." + strings.Repeat("a", 10<<10)
	for _, tt := range []struct {
		fn   string
		code string
	}{
		{`public.f(jsonb); drop table x; --`, codeInvalidParameter},
		{`biz.ok; select 1`, codeInvalidParameter},
		{`biz.ok; drop table biz.canary`, codeInvalidParameter},
		{`biz.ok(jsonb)`, codeInvalidParameter},
		{`biz.ok('{}'); drop table x`, codeInvalidParameter},
		{`"biz"."ok"`, codeInvalidParameter},
		{`"biz.ok"`, codeInvalidParameter},
		{`biz."ok"`, codeInvalidParameter},
		{`biz.ok'`, codeInvalidParameter},
		{`biz.ok'); drop table x; --`, codeInvalidParameter},
		{`BIZ.OK`, codeInvalidParameter},
		{`Biz.ok`, codeInvalidParameter},
		{``, codeInvalidParameter},
		{long, codeInvalidParameter},
		{`biz.ok--`, codeInvalidParameter},
		{`biz.ok/**/`, codeInvalidParameter},
		{`biz . ok`, codeInvalidParameter},
		{` biz.ok`, codeInvalidParameter},
		{"biz.ok\n", codeInvalidParameter},
		{"biz.ok\t", codeInvalidParameter},
		{`biz..ok`, codeInvalidParameter},
		{`biz.`, codeInvalidParameter},
		{`.ok`, codeInvalidParameter},
		{`biz.ok.extra`, codeInvalidParameter},
		{`db.biz.ok`, codeInvalidParameter},
		{`bïz.ok`, codeInvalidParameter},
		{"biz.ok\u00a0", codeInvalidParameter},
		{`1biz.ok`, codeInvalidParameter},
		{strings.Repeat("a", 64) + ".ok", codeInvalidParameter}, // PostgreSQL would truncate it to 63
		{`biz.ok$$; drop table x; $$`, codeInvalidParameter},
		{`biz.ok$$`, codeUndefinedFunc},  // well-formed ($ is an identifier character), and no such function
		{`select.ok`, codeUndefinedFunc}, // a keyword is quoted by %I, and no such schema
		{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63), codeUndefinedFunc},
		{`pg_catalog.pg_sleep`, codeNoPrivilege},
		{`pg_catalog.jsonb_strip_nulls`, codeNoPrivilege},
		{`pg_temp.ok`, codeNoPrivilege},
		{`information_schema._pg_expandarray`, codeNoPrivilege},
		{`internal.run_function`, codeUndefinedFunc},
		{`queues.enqueue`, codeUndefinedFunc},
		{`biz.secret`, codeNoPrivilege},
	} {
		label := tt.fn
		if len(label) > 80 {
			label = label[:80] + "..."
		}
		_, err := runFunction(ctx, worker, tt.fn, `{}`)
		pe := requirePgError(t, err, tt.code, label)
		require.True(t, strings.HasPrefix(pe.Message, "run_function: "), "refused by the runner's own checks: %s: %s", label, pe.Message)
		require.LessOrEqual(t, len(pe.Message), 600, "the message stays short however long the name: %s", label)
	}

	require.Equal(t, before, scalar[int](t, admin, objects), "no table or function was created or dropped")
	require.Equal(t, 42, scalar[int](t, admin, `select n from biz.canary`))
	require.Zero(t, scalar[int](t, admin, `select count(*) from public.x`))
	require.Zero(t, scalar[int](t, admin, `select count(*) from biz.secret_log`), "biz.secret never ran")
}

// The worker's login user touches no table in queues or biz, calls no ungranted function
// directly, cannot create schemas or functions, and cannot take a stronger role.
func TestWorkerRoleCannotBypassTheRunner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, worker, _ := newRunFunctionDB(t)

	rows, err := admin.Query(ctx, `
		select c.relnamespace::regnamespace::text, c.relname::text,
		       (select a.attname::text from pg_attribute a
		        where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped and a.attidentity = '' and a.attgenerated = ''
		        order by a.attnum limit 1),
		       c.relkind = 'v' and pg_relation_is_updatable(c.oid, false) = 0
		from pg_class c
		where c.relnamespace in ('queues'::regnamespace, 'biz'::regnamespace) and c.relkind in ('r', 'p', 'v', 'm')
		order by 1, 2`)
	require.NoError(t, err)
	type table struct {
		schema, name, col string
		readOnlyView      bool // a view no one can write (queues.limit_status)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var tb table
		return tb, r.Scan(&tb.schema, &tb.name, &tb.col, &tb.readOnlyView)
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(tables), 7, "queues.task, task_lease, task_event, error, schema_migration, biz.*")

	for _, tb := range tables {
		rel := pgx.Identifier{tb.schema, tb.name}.Sanitize()
		col := pgx.Identifier{tb.col}.Sanitize()
		for i, sql := range []string{
			"select * from " + rel,
			"insert into " + rel + " default values",
			"update " + rel + " set " + col + " = " + col,
			"delete from " + rel,
			"truncate " + rel,
		} {
			_, err := worker.Exec(ctx, sql)
			if tb.readOnlyView && i > 0 {
				// PostgreSQL refuses a write to a view that cannot be written (and a truncate
				// of any view) before it looks at privileges.
				code := "55000" // object_not_in_prerequisite_state: cannot insert into view
				if i == 4 {
					code = "42809" // wrong_object_type: not a table
				}
				requirePgError(t, err, code, sql)
				continue
			}
			pe := requirePgError(t, err, codeNoPrivilege, sql)
			require.Contains(t, pe.Message, "permission denied", sql)
		}
	}

	for _, sql := range []string{
		`select biz.secret('{}')`, // not granted
		`select hidden.ok('{}')`,  // no usage on the schema
		`create schema evil`,      // no CREATE on the database
		`create function biz.evil(jsonb) returns jsonb language sql as $$ select $1 $$`, // no CREATE on biz
		`create table biz.t (n int)`,
		`alter function biz.secret(jsonb) security invoker`, // not the owner
		`create or replace function biz.ok(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$`,
		`set role ` + pgx.Identifier{scalar[string](t, admin, `select current_user`)}.Sanitize(),
		`grant execute on function biz.secret(jsonb) to public`, // it holds no privilege on it to grant
	} {
		_, err := worker.Exec(ctx, sql)
		requirePgError(t, err, codeNoPrivilege, sql)
	}

	// A function of its own in pg_temp (any role may have temporary objects) is refused too.
	conn, err := worker.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `create function pg_temp.mine(jsonb) returns jsonb language sql as $$ select '{"success": true}'::jsonb $$`)
	require.NoError(t, err)
	var schema string
	require.NoError(t, conn.QueryRow(ctx, `select pronamespace::regnamespace::text from pg_proc where proname = 'mine'`).Scan(&schema))
	for _, fn := range []string{"pg_temp.mine", schema + ".mine"} {
		_, err = conn.Exec(ctx, `select internal.run_function($1, '{}')`, fn)
		pe := requirePgError(t, err, codeNoPrivilege, fn)
		require.Contains(t, pe.Message, "system schema")
	}
	_, err = conn.Exec(ctx, `discard temp`)
	require.NoError(t, err)

	// Through the function it was granted, it does what the function does and no more.
	var ok string
	require.NoError(t, worker.QueryRow(ctx, `select biz.ok('{"direct": true}')::text`).Scan(&ok))
	require.JSONEq(t, `{"status": "succeeded", "payload": {"direct": true}}`, ok)
	require.Zero(t, scalar[int](t, admin, `select count(*) from biz.secret_log`), "biz.secret never ran")
}

// A role that can create schemas puts its own now() ahead of pg_catalog in its search_path.
// An unpinned security definer function is hijacked (the control); a business function that
// pins search_path = pg_catalog, pg_temp keeps its real behaviour, called directly or through
// the runner.
func TestSearchPathHijackFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, worker, _ := newRunFunctionDB(t)

	// The worker itself cannot create a schema to hijack with.
	_, err := worker.Exec(ctx, `create schema evil`)
	pe := requirePgError(t, err, codeNoPrivilege, "create schema")
	require.Contains(t, pe.Message, "permission denied for database")

	mustExec(t, admin, `
		create function biz.clock_unpinned(jsonb) returns jsonb language sql security definer as
		$$ select jsonb_build_object('status', 'succeeded', 'payload', extract(year from now())::int) $$;
		revoke all on function biz.clock_unpinned(jsonb) from public;
		grant execute on function biz.clock_unpinned(jsonb) to worker_service_user`)
	dbName := scalar[string](t, admin, `select current_database()`)
	attackerPool, _ := newLoginRole(t, admin, "ta",
		"grant worker_service_user to %s",
		"grant create on database "+pgx.Identifier{dbName}.Sanitize()+" to %s")

	attacker, err := attackerPool.Acquire(ctx) // one session: search_path is per session
	require.NoError(t, err)
	defer attacker.Release()
	for _, sql := range []string{
		`create schema evil`,
		`create function evil.now() returns timestamptz language sql as $$ select timestamptz '2000-06-01 00:00:00+00' $$`,
		`set search_path = evil, pg_catalog, public`,
	} {
		_, err := attacker.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	year := func(sql string) int {
		t.Helper()
		var env struct{ Payload int }
		var raw []byte
		require.NoError(t, attacker.QueryRow(ctx, sql).Scan(&raw), sql)
		require.NoError(t, json.Unmarshal(raw, &env), sql)
		return env.Payload
	}
	realYear := time.Now().UTC().Year()
	var hijacked time.Time
	require.NoError(t, attacker.QueryRow(ctx, `select now()`).Scan(&hijacked))
	require.Equal(t, 2000, hijacked.UTC().Year(), "the attacker's own session resolves now() to evil.now()")
	require.Equal(t, 2000, year(`select biz.clock_unpinned('{}')`), "control: an unpinned definer function is hijacked")

	require.InDelta(t, realYear, year(`select biz.clock('{}')`), 1, "a pinned function ignores the caller's search_path")
	require.InDelta(t, realYear, year(`select internal.run_function('biz.clock', '{}')`), 1)
	// The runner's own pinned search_path also covers what it calls.
	require.InDelta(t, realYear, year(`select internal.run_function('biz.clock_unpinned', '{}')`), 1)

	// The runner itself resolves nothing through the caller's search_path: evil.ok is not biz.ok.
	_, err = attacker.Exec(ctx, `create function evil.ok(jsonb) returns jsonb language sql as $$ select '{"status": "hijacked"}'::jsonb $$`)
	require.NoError(t, err)
	var got string
	require.NoError(t, attacker.QueryRow(ctx, `select internal.run_function('biz.ok', '{}')::text`).Scan(&got))
	require.JSONEq(t, `{"status": "succeeded", "payload": {}}`, got)
	_, err = attacker.Exec(ctx, `reset search_path`)
	require.NoError(t, err)
}

// No function in queues or internal is executable by PUBLIC: a role with no grants can run
// none of them. The runner is security invoker with a pinned search_path, and executable by
// worker_service_user.
func TestNoPublicExecuteInQueuesOrInternal(t *testing.T) {
	t.Parallel()
	admin := dbtest.NewDB(t)
	bare := "tb_" + randomHex(t, 6)
	mustExec(t, admin, "create role "+pgx.Identifier{bare}.Sanitize()+" nologin")
	t.Cleanup(func() { mustExec(t, admin, "drop role "+pgx.Identifier{bare}.Sanitize()) })

	const fns = `from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname in ('queues', 'internal')`
	require.Greater(t, scalar[int](t, admin, `select count(*) `+fns), 20)
	require.Empty(t, scalar[[]string](t, admin,
		`select coalesce(array_agg(p.oid::regprocedure::text order by p.oid::regprocedure::text), '{}') `+fns+
			` and has_function_privilege($1, p.oid, 'execute')`, bare),
		"functions a role without grants can execute")
	require.Empty(t, scalar[[]string](t, admin,
		`select coalesce(array_agg(p.oid::regprocedure::text order by p.oid::regprocedure::text), '{}') `+fns+
			` and (p.proacl is null or exists (select from aclexplode(p.proacl) a where a.grantee = 0))`),
		"functions with a default (PUBLIC) or explicit PUBLIC grant")

	var secdef bool
	var config []string
	require.NoError(t, admin.QueryRow(context.Background(),
		`select prosecdef, proconfig from pg_proc where oid = 'internal.run_function(text, jsonb)'::regprocedure`).
		Scan(&secdef, &config))
	require.False(t, secdef, "the runner is security invoker")
	require.Equal(t, []string{"search_path=pg_catalog, pg_temp"}, config)
	require.True(t, scalar[bool](t, admin,
		`select has_function_privilege('worker_service_user', 'internal.run_function(text, jsonb)', 'execute')`))
}

// internal.run_functions makes many calls in one statement with the runner's checks: each
// result is what internal.run_function gives for the same call, and a batch holding one call
// the runner refuses is refused whole, with that call's own SQLSTATE and message, before
// anything runs.
func TestRunFunctionsBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, worker, role := newRunFunctionDB(t)

	names := []string{"biz.ok", "biz.rename", "biz.ok", "biz.ok"}
	payloads := []string{`{"n": 1}`, `{"account_id": 1, "name": "ann"}`, `{"n": 2}`, `{"n": 3, "s": "'); --"}`}
	rows, err := worker.Query(ctx, `select ord, result::text from internal.run_functions($1, $2::text[]::jsonb[]) order by ord`,
		names, payloads)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var ord int
		var res string
		require.NoError(t, rows.Scan(&ord, &res))
		require.Equal(t, len(got)+1, ord)
		got = append(got, res)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, len(names))
	for i := range names {
		if names[i] == "biz.rename" {
			continue // it writes: compared below
		}
		one, err := runFunction(ctx, worker, names[i], payloads[i])
		require.NoError(t, err)
		require.JSONEq(t, one, got[i], "call %d", i+1)
	}
	require.JSONEq(t, `{"success": true}`, got[1])
	require.Equal(t, "ann", scalar[string](t, admin, `select name from biz.account where account_id = 1`))

	for _, tt := range []struct {
		name, fn, payload, code, msg string
	}{
		{"not granted", "biz.secret", `{}`, codeNoPrivilege,
			fmt.Sprintf(`run_function: permission denied for function biz.secret(jsonb): role %s has no EXECUTE on it`, role)},
		{"malformed", "biz.ok; drop table biz.account", `{}`, codeInvalidParameter, `is malformed`},
		{"system schema", "pg_catalog.pg_sleep", `{}`, codeNoPrivilege, `the runner calls application functions only`},
		{"no such function", "biz.nope", `{}`, codeUndefinedFunc, `run_function: function biz.nope(jsonb) does not exist`},
		{"returns int", "biz.int_ret", `{}`, codeInvalidParameter, `returns integer, not jsonb`},
		{"array payload", "biz.ok", `[1]`, codeInvalidParameter, `run_functions: every payload must be a JSON object`},
	} {
		_, err := worker.Exec(ctx, `select * from internal.run_functions($1, $2::text[]::jsonb[])`,
			[]string{"biz.ok", tt.fn, "biz.ok"}, []string{`{}`, tt.payload, `{}`})
		pe := requirePgError(t, err, tt.code, tt.name)
		require.Contains(t, pe.Message, tt.msg, tt.name)
	}
	_, err = worker.Exec(ctx, `select * from internal.run_functions($1, $2::text[]::jsonb[])`, []string{"biz.ok"}, []string{})
	pe := requirePgError(t, err, codeInvalidParameter, "lengths")
	require.Equal(t, "run_functions: 1 function names and 0 payloads; expected one of each per call", pe.Message)
	require.Zero(t, scalar[int](t, admin, `select count(*) from biz.secret_log`), "biz.secret never ran")
}
