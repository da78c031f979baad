package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The worked example of docs/processes.md, "Waiting for the outside world" (crm.start_signup,
// crm.confirm_signup_supervisor), run as the document prints it by real `taskorch worker`
// processes, its emails sent by the comms process through the outbox provider.

// signupExampleSQL is the first sql block after the heading "## Waiting for the outside world"
// of docs/processes.md: the test runs the document's text, so the two cannot drift apart.
func signupExampleSQL(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/processes.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## Waiting for the outside world\n")
	require.True(t, ok, "docs/processes.md has no heading \"## Waiting for the outside world\"")
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	_, block, ok := strings.Cut(section, "\n```sql\n")
	require.True(t, ok, "the section has no sql block")
	sql, _, ok := strings.Cut(block, "\n```")
	require.True(t, ok, "the section's sql block is not closed")
	require.Contains(t, sql, "create function crm.start_signup", "the worked example is the first sql block")
	return sql
}

// newSignupDB makes a database migrated with the core and comms sets and the worked example.
func newSignupDB(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	_, err := taskorch.Migrate(t.Context(), pool, &taskorch.MigrateOpts{Processes: []string{"comms"}})
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), signupExampleSQL(t))
	require.NoError(t, err, "the worked example of docs/processes.md applies")
	return url, pool
}

// startSignupWorker starts a worker that sends email through the outbox provider and, while
// idle, claims again only every poll (a NOTIFY cuts the wait short).
func startSignupWorker(t *testing.T, url string, poll time.Duration) {
	t.Helper()
	startWorkerProc(t, url, "TASKORCH_PROCESSES=comms", "TASKORCH_EMAIL_PROVIDER=outbox",
		"TASKORCH_POLL_INTERVAL="+poll.String(), "TASKORCH_MAX_POLL_INTERVAL="+poll.String())
}

// startSignup calls crm.start_signup and waits until its confirmation email is in the outbox.
func startSignup(t *testing.T, pool *pgxpool.Pool, email string) string {
	t.Helper()
	id := q[int64](t, pool, `select crm.start_signup($1)`, email)
	waitFor(t, pool, "the confirmation email in the outbox", `select exists (select from queues.outbox_message
		where channel = 'email' and recipient = $1 and request->>'subject' = 'Confirm your address')`, email)
	return strconv.FormatInt(id, 10)
}

// supervisorRuns counts the signup's supervisor tasks with status (any status when empty).
func supervisorRuns(t *testing.T, pool *pgxpool.Pool, key, status string) int {
	t.Helper()
	return q[int](t, pool, `select count(*)::int from queues.task where task_type = 'db_function'
		and payload->>'db_function' = 'crm.confirm_signup_supervisor' and payload->>'signup_id' = $1
		and ($2 = '' or status::text = $2)`, key, status)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// The signal wakes the waiting supervisor: crm.signup_done says 'confirmed' within a second of
// the signal's commit, with the worker polling every 30 s, so that only the NOTIFY can do it.
func TestE2ESignalConfirmsSignupWithinASecond(t *testing.T) {
	t.Parallel()
	url, pool := newSignupDB(t)
	startSignupWorker(t, url, 30*time.Second)
	key := startSignup(t, pool, "ann@example.com")

	// The supervisor waits: one run, pending, due at the 24-hour deadline, registered.
	require.True(t, q[bool](t, pool, `select t.status = 'pending' and t.run_at > now() + interval '23 hours'
		and exists (select from queues.signal_wait w where w.task_id = t.task_id and w.name = 'email.confirmed' and w.key = $1)
		from queues.task t where t.task_type = 'db_function' and t.payload->>'signup_id' = $1`, key))
	// The worker is idle: nothing due or running is left that a claim would pick up.
	waitFor(t, pool, "the worker idle", `select not exists (select from queues.task
		where status = 'running' or (status = 'pending' and run_at <= now()))`)

	// The confirmation endpoint, in a session of its own; autocommit: committed when it returns.
	var recorded bool
	require.NoError(t, connect(t, url).QueryRow(t.Context(),
		`select queues.signal('email.confirmed', $1, '{"ip": "203.0.113.7"}')`, key).Scan(&recorded))
	committed := time.Now()
	require.True(t, recorded)

	waitFor(t, pool, "the signup confirmed", `select exists (select from crm.signup_done
		where signup_id::text = $1 and outcome = 'confirmed')`, key)
	elapsed := time.Since(committed)
	inDB := q[float64](t, pool, `select extract(epoch from d.created_at - s.received_at)::float8
		from crm.signup_done d, queues.signal s where d.signup_id::text = $1 and s.name = 'email.confirmed' and s.key = $1`, key)
	t.Logf("signal commit to signup_done seen: %v (in the database, from the signal statement's start, received_at, to signup_done.created_at: %.1f ms)",
		elapsed, inDB*1000)
	require.Less(t, elapsed, time.Second, "the signal wakes the supervisor within a second")

	require.Equal(t, 1, supervisorRuns(t, pool, key, "completed"))
	require.Equal(t, 1, q[int](t, pool, `select count(*)::int from queues.task_event e join queues.task t using (task_id)
		where t.task_type = 'db_function' and t.payload->>'signup_id' = $1 and e.event = 'signalled'`, key),
		"made due by the signal, not by its deadline")
	require.Zero(t, q[int](t, pool, `select count(*)::int from queues.outbox_message where request->>'subject' = 'Still interested?'`))
}

// The same signal emitted twice at once from two sessions, each in its own transaction: one
// records it (true), the other changes nothing (false); the process finishes once.
func TestE2ESignalEmittedTwiceAtOnce(t *testing.T) {
	t.Parallel()
	url, pool := newSignupDB(t)
	startSignupWorker(t, url, 30*time.Second)
	key := startSignup(t, pool, "bea@example.com")

	type emit struct {
		from     string
		recorded bool
		err      error
	}
	conns := []*pgx.Conn{connect(t, url), connect(t, url)}
	var begun sync.WaitGroup
	release := make(chan struct{})
	results := make(chan emit, len(conns))
	for i, conn := range conns {
		begun.Add(1)
		go func() {
			e := emit{from: "session-" + strconv.Itoa(i)}
			defer func() { results <- e }()
			tx, err := conn.Begin(context.Background())
			begun.Done()
			if err != nil {
				e.err = err
				return
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			<-release
			if e.err = tx.QueryRow(context.Background(), `select queues.signal('email.confirmed', $1, jsonb_build_object('from', $2::text))`,
				key, e.from).Scan(&e.recorded); e.err != nil {
				return
			}
			e.err = tx.Commit(context.Background())
		}()
	}
	begun.Wait()
	close(release)
	var winners []string
	for range conns {
		e := <-results
		require.NoError(t, e.err, e.from)
		if e.recorded {
			winners = append(winners, e.from)
		}
	}
	require.Len(t, winners, 1, "exactly one emit records the signal")

	require.Equal(t, 1, q[int](t, pool, `select count(*)::int from queues.signal where name = 'email.confirmed' and key = $1`, key))
	require.Equal(t, winners[0], q[string](t, pool, `select payload->>'from' from queues.signal where name = 'email.confirmed' and key = $1`, key),
		"the first emit's payload stays")
	waitFor(t, pool, "the signup confirmed", `select exists (select from crm.signup_done where signup_id::text = $1 and outcome = 'confirmed')`, key)
	waitFor(t, pool, "the supervisor's run completed", `select not exists (select from queues.task where task_type = 'db_function'
		and payload->>'signup_id' = $1 and status <> 'completed')`, key)
	require.Equal(t, 1, q[int](t, pool, `select count(*)::int from crm.signup_done where signup_id::text = $1`, key), "one terminal row")
	require.Equal(t, 1, supervisorRuns(t, pool, key, ""), "one supervisor run, no second one")
	require.Equal(t, 1, q[int](t, pool, `select count(*)::int from queues.task_lease l join queues.task t using (task_id)
		where t.task_type = 'db_function' and t.payload->>'signup_id' = $1`, key), "claimed once")
}

// A wait whose deadline passes with no signal goes into the timeout branch: the reminder is
// sent and the signup ends 'reminded'. A confirmation that comes after that changes nothing.
func TestE2ESignalDeadlineSendsReminder(t *testing.T) {
	t.Parallel()
	url, pool := newSignupDB(t)
	startSignupWorker(t, url, 100*time.Millisecond)
	key := startSignup(t, pool, "cat@example.com")

	// The deadline passing: the supervisor's run, due 24 hours from now, is made due now (this
	// update stands for the clock reaching the deadline; the worker's poll picks it up).
	tag, err := pool.Exec(t.Context(), `update queues.task set run_at = now() where task_type = 'db_function'
		and payload->>'signup_id' = $1 and status = 'pending'`, key)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected(), "one supervisor run waits")

	waitFor(t, pool, "the signup reminded", `select exists (select from crm.signup_done where signup_id::text = $1 and outcome = 'reminded')`, key)
	waitFor(t, pool, "the reminder in the outbox", `select exists (select from queues.outbox_message
		where channel = 'email' and recipient = 'cat@example.com' and request->>'subject' = 'Still interested?' and status = 'sent')`)
	require.Contains(t, q[string](t, pool, `select request->>'text' from queues.outbox_message where request->>'subject' = 'Still interested?'`),
		"https://example.com/confirm?signup="+key)
	require.Equal(t, []string{"Confirm your address", "Still interested?"}, q[[]string](t, pool, `select array_agg(m.subject order by t.send_email_task_id)
		from comms.send_email_task t join comms.email_message m using (message_id) where m.to_address = 'cat@example.com'`),
		"two emails through the comms process: the link, then the reminder")
	require.Zero(t, q[int](t, pool, `select count(*)::int from queues.signal`), "no signal came")

	// A late confirmation is recorded, but the process has ended: nothing runs again.
	require.True(t, q[bool](t, pool, `select queues.signal('email.confirmed', $1)`, key))
	require.Equal(t, 1, supervisorRuns(t, pool, key, "completed"))
	require.Equal(t, 1, supervisorRuns(t, pool, key, ""))
	require.Equal(t, "reminded", q[string](t, pool, `select outcome from crm.signup_done where signup_id::text = $1`, key))
}
