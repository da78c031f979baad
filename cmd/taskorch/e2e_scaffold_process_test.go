package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// remindUnpaidPayload is what a developer writes at the scaffold's TODO in the before handler:
// the email request of an attempt, from the domain table of invoices.
const remindUnpaidPayload = `
create table billing.invoice (invoice_id bigint primary key, email text not null);
create or replace function billing.get_remind_unpaid_payload(_payload jsonb) returns jsonb
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _attempt_id bigint;
    _r record;
begin
    if jsonb_typeof(_payload -> 'remind_unpaid_attempt_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'get_remind_unpaid_payload: payload needs a numeric remind_unpaid_attempt_id');
    end if;
    _attempt_id := (_payload ->> 'remind_unpaid_attempt_id')::bigint;
    select t.invoice_id, i.email into _r
    from billing.remind_unpaid_attempt a
    join billing.remind_unpaid_task t using (remind_unpaid_task_id)
    join billing.invoice i using (invoice_id)
    where a.remind_unpaid_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('get_remind_unpaid_payload: remind_unpaid_attempt %s does not exist', _attempt_id));
    end if;
    return jsonb_build_object('success', true, 'payload', jsonb_build_object(
        'to', _r.email, 'subject', 'Invoice ' || _r.invoice_id || ' is unpaid', 'text', 'Please pay.',
        'idempotency_key', 'billing-remind-unpaid-attempt-' || _attempt_id));
end $$;`

// billingProvider is a local Resend (its documented HTTP API): it accepts every email, except
// that while hanging it holds the requests to hang-* addresses until released, and while
// failing it answers 500 (retriable) to fail-* addresses.
type billingProvider struct {
	hanging, failing atomic.Bool
	hung             chan string   // a hang-* request is being held
	release          chan struct{} // closed: held requests are answered
	releaseOnce      sync.Once
}

func newBillingProvider(t *testing.T) (*billingProvider, *httptest.Server) {
	p := &billingProvider{hung: make(chan string, 100), release: make(chan struct{})}
	p.hanging.Store(true)
	p.failing.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			To []string `json:"to"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil || len(req.To) != 1 {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"statusCode":422,"name":"validation_error","message":"bad request"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch to := req.To[0]; {
		case strings.HasPrefix(to, "hang-") && p.hanging.Load():
			p.hung <- to
			<-p.release // the worker is killed while it waits for this answer
			return
		case strings.HasPrefix(to, "fail-") && p.failing.Load():
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"statusCode":500,"name":"internal_server_error","message":"An unexpected error occurred."}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"`+r.Header.Get("Idempotency-Key")+`"}`)
	}))
	t.Cleanup(func() { p.stopHanging(); srv.Close() })
	return p, srv
}

// stopHanging answers the held requests and holds no more.
func (p *billingProvider) stopHanging() {
	p.hanging.Store(false)
	p.releaseOnce.Do(func() { close(p.release) })
}

// A process written by `taskorch scaffold process` with a wait step, applied as a developer
// would (the file, then the before handler's TODO filled in), run by real `taskorch worker`
// processes with a local Resend, through every way it can end:
//
//	(a) the signal arrives after the reminder was accepted (or before: no reminder): succeeded;
//	(c) the worker is SIGKILLed while reminders are at the provider; other workers finish them:
//	    the attempt that was in flight runs again (its task claimed twice), succeeded;
//	(d) every attempt fails (max_attempts 2): failed; retried by hand (`taskorch processes retry`)
//	    once the provider is back, and signalled: succeeded;
//	(b) no signal within process_config.wait_timeout: timed_out, an outcome, not a failure.
//
// Each instance ends exactly once with the right outcome, by the database's own facts.
func TestE2EScaffoldedProcessOutcomes(t *testing.T) {
	t.Parallel()
	provider, resend := newBillingProvider(t)
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	db := []string{"--database-url", url}

	dir := t.TempDir()
	r := run(t, "scaffold", "process", "remind_unpaid", "--schema", "billing", "--key", "invoice_id", "--channel", "email",
		"--max-attempts", "2", "--wait-signal", "invoice.paid", "--wait-timeout", "1 hour", "--out", dir)
	require.Equal(t, 0, r.code, r.err)
	sql, err := os.ReadFile(strings.TrimSpace(r.out))
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), string(sql))
	require.NoError(t, err, "the scaffolded file applies")
	_, err = pool.Exec(t.Context(), remindUnpaidPayload+`;
		update billing.process_config set backoff_base = '100 ms', backoff_max = '500 ms', check_interval = '1 second'
		where process = 'remind_unpaid'`)
	require.NoError(t, err)

	env := []string{"TASKORCH_LEASE_DURATION=2s", "TASKORCH_EMAIL_PROVIDER=resend", "TASKORCH_RESEND_API_KEY=re_test_key",
		"TASKORCH_RESEND_BASE_URL=" + resend.URL, "TASKORCH_EMAIL_FROM=billing@example.com"}
	first := startWorkerProc(t, url, env...)

	kickoff := func(invoice int64, email string) int64 {
		t.Helper()
		_, err := pool.Exec(t.Context(), `insert into billing.invoice values ($1, $2)`, invoice, email)
		require.NoError(t, err)
		var id int64
		var refused *string
		require.NoError(t, pool.QueryRow(t.Context(), `select remind_unpaid_task_id, validation_failure_message
			from billing.kickoff_remind_unpaid($1)`, invoice).Scan(&id, &refused))
		require.Nil(t, refused)
		return id
	}
	signal := func(invoice int64) {
		t.Helper()
		_, err := pool.Exec(t.Context(), `select queues.signal('invoice.paid', $1::text, '{}')`, strconv.FormatInt(invoice, 10))
		require.NoError(t, err)
	}
	waitState := func(id int64, want string) {
		t.Helper()
		waitFor(t, pool, "instance "+strconv.FormatInt(id, 10)+" "+want,
			`select coalesce((select state = $2 from billing.remind_unpaid_instances where instance_id = $1), false)`, id, want)
	}
	accepted := `select billing.has_remind_unpaid_succeeded_attempt($1)`
	want := map[int64]string{} // instance id -> its outcome

	// (a) The reminders are accepted; the process waits for the payment; it comes. An invoice
	// paid before its kickoff gets no reminder.
	var paidLater []int64
	for invoice := int64(1); invoice <= 3; invoice++ {
		paidLater = append(paidLater, kickoff(invoice, "ok-"+strconv.FormatInt(invoice, 10)+"@example.com"))
	}
	signal(4)
	paidFirst := kickoff(4, "ok-4@example.com")
	for i, id := range paidLater {
		waitFor(t, pool, "reminder accepted", accepted, id)
		waitState(id, "waiting") // for its payment
		signal(int64(i + 1))
		want[id] = "succeeded"
	}
	want[paidFirst] = "succeeded"
	for id := range want {
		waitState(id, "succeeded")
	}
	require.Zero(t, q[int](t, pool, `select billing.count_remind_unpaid_attempts($1)`, paidFirst), "paid first: no reminder")

	// (c) Reminders at the provider when the worker is SIGKILLed; two other workers finish them.
	var inFlight []int64
	for invoice := int64(10); invoice <= 13; invoice++ {
		inFlight = append(inFlight, kickoff(invoice, "hang-"+strconv.FormatInt(invoice, 10)+"@example.com"))
	}
	select {
	case <-provider.hung:
	case <-time.After(60 * time.Second):
		t.Fatal("no reminder reached the provider")
	}
	first.signal(t, syscall.SIGKILL)
	first.wait(t)
	provider.stopHanging()
	startWorkerProc(t, url, env...)
	startWorkerProc(t, url, env...)
	for i, id := range inFlight {
		waitFor(t, pool, "reminder accepted after the kill", accepted, id)
		signal(int64(10 + i))
		want[id] = "succeeded"
	}
	for _, id := range inFlight {
		waitState(id, "succeeded")
	}
	require.Greater(t, q[int](t, pool, `select count(*)::int from queues.task_lease l
		join billing.remind_unpaid_attempt a using (task_id) where a.remind_unpaid_task_id = any ($1)`, inFlight),
		q[int](t, pool, `select count(*)::int from billing.remind_unpaid_attempt where remind_unpaid_task_id = any ($1)`, inFlight),
		"the reminder in flight at the kill was claimed again")

	// (d) The provider fails every attempt: the process fails after max_attempts; retried by hand
	// once the provider is back, it succeeds.
	unlucky := kickoff(20, "fail-20@example.com")
	waitState(unlucky, "failed")
	require.Equal(t, 2, q[int](t, pool, `select billing.count_remind_unpaid_failed_attempts($1)`, unlucky))
	require.True(t, q[bool](t, pool, `select billing.is_remind_unpaid_stuck($1)`, unlucky))
	require.Contains(t, q[string](t, pool, `select error from billing.remind_unpaid_instances where instance_id = $1`, unlucky),
		"remind_unpaid not done after 2 failed attempts (max 2); last error: email provider: resend: 500")
	require.Equal(t, "1 0", q[string](t, pool, `select failed || ' ' || timed_out from queues.process_instance_counts()
		where process = 'billing.remind_unpaid'`))
	provider.failing.Store(false)
	r = run(t, append([]string{"processes", "retry", "billing.remind_unpaid", strconv.FormatInt(unlucky, 10),
		"--reason", "the provider is back"}, db...)...)
	require.Equal(t, 0, r.code, r.err)
	waitFor(t, pool, "the retried reminder accepted", accepted, unlucky)
	signal(20)
	want[unlucky] = "succeeded"
	waitState(unlucky, "succeeded")

	// (b) Nobody pays within the wait: timed_out, not failed.
	_, err = pool.Exec(t.Context(), `update billing.process_config set wait_timeout = '1 second' where process = 'remind_unpaid'`)
	require.NoError(t, err)
	unpaid := kickoff(30, "ok-30@example.com")
	want[unpaid] = "timed_out"
	waitState(unpaid, "timed_out")
	require.Equal(t, "no invoice.paid signal within 00:00:01",
		q[string](t, pool, `select error from billing.remind_unpaid_instances where instance_id = $1`, unpaid))
	require.False(t, q[bool](t, pool, `select billing.is_remind_unpaid_stuck($1)`, unpaid))
	r = run(t, append([]string{"processes", "retry", "billing.remind_unpaid", strconv.FormatInt(unpaid, 10),
		"--reason", "try again"}, db...)...)
	require.Equal(t, exitState, r.code, "a timed-out instance is not retried: %s", r.err)

	// Each instance ended exactly once, with its outcome: one terminal fact (a failure of a run
	// that was restarted is not terminal), the state its view says, one accepted reminder when it
	// sent one.
	type end struct {
		State                                string
		Succeeded, Failed, TimedOut, Accepts int
	}
	for id, outcome := range want {
		var e end
		require.NoError(t, pool.QueryRow(t.Context(), `select i.state,
			(select count(*)::int from billing.remind_unpaid_task_succeeded s where s.remind_unpaid_task_id = $1),
			(select count(*)::int from billing.remind_unpaid_task_failed f where f.remind_unpaid_task_id = $1
			   and not exists (select from billing.remind_unpaid_task_restarted z where z.remind_unpaid_task_id = $1 and z.run > f.run)),
			(select count(*)::int from billing.remind_unpaid_task_timed_out o where o.remind_unpaid_task_id = $1),
			(select count(*)::int from billing.remind_unpaid_attempt a join billing.remind_unpaid_attempt_succeeded s
			   using (remind_unpaid_attempt_id) where a.remind_unpaid_task_id = $1)
			from billing.remind_unpaid_instances i where i.instance_id = $1`, id).
			Scan(&e.State, &e.Succeeded, &e.Failed, &e.TimedOut, &e.Accepts))
		w := end{State: outcome, Accepts: 1}
		switch outcome {
		case "succeeded":
			w.Succeeded = 1
		case "timed_out":
			w.TimedOut = 1
		}
		if id == paidFirst {
			w.Accepts = 0
		}
		require.Equal(t, w, e, "instance %d", id)
	}
	require.Equal(t, len(want), q[int](t, pool, `select count(*)::int from billing.remind_unpaid_task`))
	require.Equal(t, "1 2", q[string](t, pool, `select (select count(*) from billing.remind_unpaid_task_restarted)
		|| ' ' || (select count(*) from billing.remind_unpaid_attempt_failed)`), "the retry by hand, and run 1's two failures")
	require.Equal(t, "9 0 1", q[string](t, pool, `select succeeded || ' ' || failed || ' ' || timed_out
		from queues.process_instance_counts() where process = 'billing.remind_unpaid'`))
	require.Zero(t, q[int](t, pool, `select count(*)::int from queues.task where status in ('failed', 'dead')`), "no task gave up")

	timedOut := runJSON[map[string][]map[string]any](t, append([]string{"processes", "list", "--process", "billing.remind_unpaid",
		"--state", "timed_out", "--json"}, db...)...)
	require.Len(t, timedOut["instances"], 1)
	require.EqualValues(t, unpaid, timedOut["instances"][0]["instance_id"])
}
