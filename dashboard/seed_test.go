package dashboard_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// testToken is the dashboard token of the tests.
const testToken = "test-token-0123456789abcdef"

// xssNote is a payload value that would run script if it were not escaped.
const xssNote = `<script>alert("xss")</script><img src=x onerror="alert('img')">`

// seeded names the tasks seed made.
type seeded struct {
	pending, scheduled, running, completed, failed, dead, cancelled, xss, secret, keyed int64
	processRoot                                                                         int64
	supervisorTask, channelTask                                                         int64
}

// seed fills a database with something on every page: tasks in every status (one with a
// payload that tries to inject script, one with a secret), a process with two attempts (one
// failed, one succeeded) and the queue tasks that name it, a worker that leads, a schedule,
// outbox messages and a paused queue.
func seed(t *testing.T, pool *pgxpool.Pool) seeded {
	t.Helper()
	ctx := t.Context()
	var s seeded
	q := func(sql string, args ...any) int64 {
		t.Helper()
		var id int64
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&id), sql)
		return id
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	enqueue := func(typ, payload string, maxAttempts int) int64 {
		return q(`select queues.enqueue($1, $2::jsonb, now(), 0, null, $3)`, typ, payload, maxAttempts)
	}
	// claim takes the given task (and only it) under a lease of worker seed-worker.
	claim := func(id int64) int64 {
		exec(`update queues.task set priority = 1000 where task_id = $1`, id)
		lease := q(`select lease_id from queues.claim_tasks('seed-worker', 1) where task_id = $1`, id)
		return lease
	}

	exec(`select queues.register_worker('seed-worker', 'seed-host', 4242, 8, 'v-test', 'postgres', null)`)
	q(`select queues.acquire_leadership('seed-worker', interval '1 hour')`)

	for i := range 3 {
		id := enqueue("report.build", `{"report": "daily", "n": `+itoa(int64(i))+`}`, 5)
		exec(`select queues.complete_task($1, $2)`, id, claim(id))
		s.completed = id
	}
	s.running = enqueue("img.resize", `{"image": "cat.png", "width": 640}`, 5)
	claim(s.running)

	s.failed = enqueue("email.welcome", `{"to": "ann@example.com"}`, 5)
	q(`select 1 from queues.fail_task($1, 'validation: no such template "welcome-v9"', $2, false)`, s.failed, claim(s.failed))

	s.dead = enqueue("email.welcome", `{"to": "bob@example.com"}`, 1)
	q(`select 1 from queues.fail_task($1, 'smtp: dial postgres://mailer:hunter2@db:5432/x failed; password=hunter2', $2)`, s.dead, claim(s.dead))

	s.xss = enqueue("xss.probe", `{"note": `+jsonString(xssNote)+`}`, 1)
	q(`select 1 from queues.fail_task($1, $2, $3)`, s.xss, "handler said "+xssNote, claim(s.xss))

	s.secret = enqueue("billing.charge", `{"customer": "cus_42", "api_key": "sk_live_SUPERSECRET", "nested": {"password": "hunter2"}}`, 5)

	s.cancelled = enqueue("report.build", `{"report": "weekly"}`, 5)
	exec(`select queues.cancel_task($1, 'not needed')`, s.cancelled)

	s.pending = enqueue("img.resize", `{"image": "dog.png", "width": 320}`, 5)
	s.keyed = q(`select queues.enqueue('report.build', '{"report": "monthly"}', now(), 0, 'report-2025-11', 5)`)
	s.scheduled = q(`select queues.enqueue('report.build', '{"report": "yearly"}', now() + interval '2 days')`)

	exec(`select queues.add_schedule('nightly-report', '0 3 * * *', 'report.build', '{"report": "nightly"}')`)
	// A schedule declared in a worker's code (WorkerConfig.Periodic): the dashboard marks it.
	exec(`select queues.add_schedule('hourly-digest', '0 * * * *', 'mail.digest')`)
	exec(`update queues.schedule set declared_in_code = true where name = 'hourly-digest'`)
	exec(`select queues.pause_queue('img.resize', 'seed')`)
	exec(`select queues.set_limit('report.build', _max_running => 2, _key_field => 'report')`)
	exec(`select queues.set_limit('sms.alert', _rate_per_second => 1, _burst => 3)`)
	exec(`select queues.record_outbox_message($1, 'email', '{"to": "ann@example.com", "subject": "Welcome <b>Ann</b>"}')`, s.completed)
	exec(`insert into queues.outbox_rule (channel, recipient, fail) values ('sms', '+15550100', 'always')`)
	exec(`select queues.record_outbox_message(null, 'sms', '{"to": "+15550100", "body": "code 1234"}')`)

	// A process in the building blocks' shape, as `taskorch scaffold process ship_order` would make it,
	// and a table that merely ends in _task (not a process).
	exec(`create schema demo;
		create table demo.ship_order_task (ship_order_task_id bigint generated always as identity primary key,
			order_ref text not null, created_at timestamptz not null default now());
		create table demo.ship_order_attempt (ship_order_attempt_id bigint generated always as identity primary key,
			ship_order_task_id bigint not null references demo.ship_order_task, created_at timestamptz not null default now());
		create table demo.ship_order_attempt_succeeded (ship_order_attempt_id bigint primary key references demo.ship_order_attempt,
			created_at timestamptz not null default now());
		create table demo.ship_order_attempt_failed (ship_order_attempt_id bigint primary key references demo.ship_order_attempt,
			error_message text, created_at timestamptz not null default now());
		create table demo.ship_order_task_succeeded (ship_order_task_id bigint primary key references demo.ship_order_task,
			created_at timestamptz not null default now());
		create table demo."weird""name_task" ("weird""name_task_id" bigint primary key);
		create table demo."weird""name_task_failed" ("weird""name_task_id" bigint primary key, error_message text);
		create table demo.just_a_task (id bigint primary key);
		create function demo.ship_order_supervisor(jsonb) returns jsonb language sql as $$ select '{"status": "succeeded"}'::jsonb $$`)
	s.processRoot = q(`insert into demo.ship_order_task (order_ref) values ('ORD-<i>7</i>') returning ship_order_task_id`)
	a1 := q(`insert into demo.ship_order_attempt (ship_order_task_id) values ($1) returning ship_order_attempt_id`, s.processRoot)
	exec(`insert into demo.ship_order_attempt_failed values ($1, 'carrier timeout')`, a1)
	a2 := q(`insert into demo.ship_order_attempt (ship_order_task_id) values ($1) returning ship_order_attempt_id`, s.processRoot)
	exec(`insert into demo.ship_order_attempt_succeeded values ($1)`, a2)
	exec(`insert into demo.ship_order_task_succeeded values ($1)`, s.processRoot)
	exec(`insert into demo."weird""name_task" values (1); insert into demo."weird""name_task_failed" values (1, 'gave up')`)
	s.supervisorTask = enqueue("db_function", `{"db_function": "demo.ship_order_supervisor", "ship_order_task_id": `+itoa(s.processRoot)+`}`, 5)
	s.channelTask = enqueue("ship.label", `{"ship_order_attempt_id": `+itoa(a2)+`}`, 5)
	return s
}

// newDashboard serves a dashboard over a fresh, seeded database.
func newDashboard(t *testing.T, cfg dashboard.Config) (*httptest.Server, *pgxpool.Pool, seeded) {
	t.Helper()
	pool := dbtest.NewDB(t)
	s := seed(t, pool)
	if cfg.Token == "" && cfg.Username == "" && !cfg.ReadOnly {
		cfg.Token = testToken
	}
	h, err := dashboard.New(pool, cfg)
	require.NoError(t, err)
	return newServer(t, h), pool, s
}

// newServer serves h on 127.0.0.1 until the test ends.
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// browserlessClient is an HTTP client with a cookie jar that does not follow redirects.
func browserlessClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func taskStatus(t *testing.T, pool *pgxpool.Pool, id int64) taskorch.Status {
	t.Helper()
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	task, err := c.Get(context.WithoutCancel(t.Context()), id)
	require.NoError(t, err)
	return task.Status
}
