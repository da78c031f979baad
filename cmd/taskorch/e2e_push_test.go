package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Push workers (docs/worker.md, "Push workers: HTTP endpoints in any language"), end to end: real
// `taskorch worker` processes push tasks to a real HTTP endpoint written in Python, which checks
// every request's signature itself with the document's verify().

// pushErrors returns the errors recorded for task id, oldest first, joined.
func pushErrors(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	return q[string](t, pool, `select coalesce(string_agg(error_message, ' | ' order by error_id), '') from queues.error where task_id = $1`, id)
}

// pushResult returns task id's result as JSON text, "" for none.
func pushResult(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	return q[string](t, pool, `select coalesce(result::text, '') from queues.task where task_id = $1`, id)
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// Every row of the outcome table against the Python endpoint, from one worker process that signs
// with two secrets (a rotation in progress: the endpoint holds only the second): 2xx with JSON,
// empty and non-JSON bodies complete; a 429 snoozes without spending an attempt (Retry-After in
// seconds and as an HTTP date); a 400 fails without retry, its error bounded and holding no secret;
// a 500, a timeout and a refused connection are retried; a child gets its parent's result; a call
// longer than the lease completes at its first attempt (the lease is renewed while it runs). Every
// request carries its lease id as Idempotency-Key and the attempt's deadline.
func TestE2EPushOutcomes(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret := pushSecret(t), pushSecret(t)
	ep := startPushEndpoint(t, "push_server.py", oldSecret)
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	refused := closedPort(t)
	const timeout, lease = 15 * time.Second, 5 * time.Second
	w := startWorkerProc(t, url,
		envHTTPTargets+"=push.test="+ep.url("/hook?token=query-s3cr3t")+",push.refused="+fmt.Sprintf("http://127.0.0.1:%d/down", refused),
		envHTTPSecrets+"="+newSecret+","+oldSecret,
		"TASKORCH_HTTP_TIMEOUT="+timeout.String(), "TASKORCH_LEASE_DURATION="+lease.String())
	select {
	case <-w.out.lineWith(`"msg":"pushing tasks to an HTTP endpoint"`, `"task_type":"push.test"`):
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not log its push target")
	}
	require.NotContains(t, w.out.String(), "query-s3cr3t", "the URL's query is not logged")

	mode := func(m string, extra string) string { return `{"mode": "` + m + `"` + extra + `}` }
	ids := map[string]int64{
		"json":         enqueue(t, pool, "push.test", mode("json", `, "n": 1`), 0),
		"empty":        enqueue(t, pool, "push.test", mode("empty", ""), 0),
		"text":         enqueue(t, pool, "push.test", mode("text", ""), 0),
		"429":          enqueue(t, pool, "push.test", mode("429", `, "retry_after": "1"`), 0),
		"429date":      enqueue(t, pool, "push.test", mode("429", `, "retry_after": "date"`), 0),
		"400":          enqueue(t, pool, "push.test", mode("400", ""), 0),
		"500-then-ok":  enqueue(t, pool, "push.test", mode("500-then-ok", ""), 0),
		"slow-then-ok": enqueue(t, pool, "push.test", mode("slow-then-ok", ""), 0),
		"refused":      enqueue(t, pool, "push.refused", `{}`, 2),
		"hold":         enqueue(t, pool, "push.test", mode("hold", fmt.Sprintf(`, "seconds": %d`, int(2*lease/time.Second))), 0),
	}
	child := q[int64](t, pool, `select queues.enqueue('push.test', '{"mode": "json", "n": 2}', _after => array[$1::bigint])`, ids["json"])

	for _, name := range []string{"json", "empty", "text", "429", "429date", "500-then-ok", "slow-then-ok", "hold"} {
		waitStatus(t, pool, ids[name], "completed")
	}
	waitStatus(t, pool, child, "completed")
	waitStatus(t, pool, ids["400"], "failed")
	waitStatus(t, pool, ids["refused"], "dead")
	attempt := func(id int64) int { return q[int](t, pool, `select attempt from queues.task where task_id = $1`, id) }
	for name, calls := range map[string]int{"json": 1, "empty": 1, "text": 1, "429": 2, "429date": 2, "400": 1,
		"500-then-ok": 2, "slow-then-ok": 2, "hold": 1} {
		ep.waitCalls(t, ids[name], calls)
	}
	ep.waitCalls(t, child, 1)

	// 2xx: the body is the result.
	require.JSONEq(t, `{"echo": {"mode": "json", "n": 1}, "attempt": 1, "parents": null}`, pushResult(t, pool, ids["json"]))
	require.Empty(t, pushResult(t, pool, ids["empty"]), "204: no result")
	require.JSONEq(t, `"plain text, not JSON"`, pushResult(t, pool, ids["text"]), "a body that is not JSON is a JSON string")

	// A child gets its parent's id, status and result, and its workflow.
	var got struct {
		Parents []struct {
			TaskID int64           `json:"task_id"`
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
		} `json:"parents"`
	}
	require.NoError(t, json.Unmarshal([]byte(pushResult(t, pool, child)), &got))
	require.Len(t, got.Parents, 1)
	require.Equal(t, ids["json"], got.Parents[0].TaskID)
	require.Equal(t, "completed", got.Parents[0].Status)
	require.JSONEq(t, pushResult(t, pool, ids["json"]), string(got.Parents[0].Result))
	childReq := ep.events(t, "request", child)
	require.Len(t, childReq, 1)
	require.NotNil(t, childReq[0].WorkflowID)
	require.Equal(t, ids["json"], *childReq[0].WorkflowID)

	// 429: snoozed, then run again under a new lease with the same attempt number.
	for _, name := range []string{"429", "429date"} {
		id := ids[name]
		require.Equal(t, 1, attempt(id), "%s: a 429 spends no attempt", name)
		reqs := ep.events(t, "request", id)
		require.Len(t, reqs, 2, name)
		require.Equal(t, 1, reqs[0].Attempt, name)
		require.Equal(t, 1, reqs[1].Attempt, name)
		require.NotEqual(t, reqs[0].LeaseID, reqs[1].LeaseID, "%s: each run has its own lease", name)
		require.JSONEq(t, `{"calls": 2}`, pushResult(t, pool, id), name)
	}

	// 400: failed at once, not retried; the error names the status, is bounded and shows none
	// of the secrets the answer echoed.
	require.Equal(t, 1, attempt(ids["400"]))
	require.Len(t, ep.events(t, "request", ids["400"]), 1)
	lastErr := q[string](t, pool, `select last_error from queues.task where task_id = $1`, ids["400"])
	require.Contains(t, lastErr, "HTTP 400 Bad Request")
	require.Contains(t, lastErr, "push to "+ep.url("/hook")+":")
	require.Contains(t, lastErr, "bad request; secret=xxxxx")
	require.Less(t, len(lastErr), 1000, lastErr)
	for _, secret := range []string{oldSecret, strings.TrimPrefix(oldSecret, "whsec_"), newSecret, "sk_live_abc123", "query-s3cr3t", "v1,"} {
		require.NotContains(t, lastErr, secret)
		require.NotContains(t, pushErrors(t, pool, ids["400"]), secret)
	}

	// 500, a timeout: failed, retried, completed by the second attempt.
	require.Equal(t, 2, attempt(ids["500-then-ok"]))
	require.Contains(t, pushErrors(t, pool, ids["500-then-ok"]), "HTTP 500 Internal Server Error: database on fire")
	require.JSONEq(t, `{"calls": 2}`, pushResult(t, pool, ids["500-then-ok"]))
	require.Equal(t, 2, attempt(ids["slow-then-ok"]))
	require.Contains(t, pushErrors(t, pool, ids["slow-then-ok"]), "timed out after "+timeout.String())
	ep.waitEvent(t, "aborted", ids["slow-then-ok"]) // the timed-out request was closed

	// A call twice as long as the lease: the lease was renewed, the first attempt completed.
	require.Equal(t, 1, attempt(ids["hold"]))
	require.Len(t, ep.events(t, "request", ids["hold"]), 1)
	require.JSONEq(t, fmt.Sprintf(`{"held": %d}`, int(2*lease/time.Second)), pushResult(t, pool, ids["hold"]))
	require.Zero(t, q[int](t, pool, `select count(*) from queues.task_event where task_id = $1 and event = 'lease_expired'`, ids["hold"]))

	// A refused connection: retried, dead once its two attempts are spent.
	require.Equal(t, 2, attempt(ids["refused"]))
	refusedErrs := pushErrors(t, pool, ids["refused"])
	require.Equal(t, 2, strings.Count(refusedErrs, "connection refused"), refusedErrs)
	require.Contains(t, refusedErrs, fmt.Sprintf("push to http://127.0.0.1:%d/down: ", refused))

	// Every request: signed with both secrets (the endpoint verified one), the lease id as the
	// idempotency key, the deadline in the header and the body, within the timeout of now.
	reqs := ep.events(t, "request", 0)
	require.GreaterOrEqual(t, len(reqs), 14)
	for _, r := range reqs {
		require.Equal(t, 2, r.Signatures, "task %d", r.TaskID)
		require.Equal(t, strconv.FormatInt(r.LeaseID, 10), r.IdempotencyKey, "task %d", r.TaskID)
		require.Equal(t, fmt.Sprintf("taskorch-%d-%d", r.TaskID, r.LeaseID), r.WebhookID)
		require.Equal(t, r.BodyDeadline, r.Deadline, "task %d", r.TaskID)
		d, err := time.Parse(time.RFC3339, r.Deadline)
		require.NoError(t, err, "task %d: %q", r.TaskID, r.Deadline)
		require.WithinDuration(t, time.Now(), d, 10*time.Minute, "task %d", r.TaskID)
		require.Equal(t, q[int](t, pool, `select max_attempts from queues.task where task_id = $1`, r.TaskID), r.MaxAttempts)
	}
	require.Empty(t, ep.events(t, "bad_signature", 0))

	// The endpoint's check can fail: a request signed with another secret is refused.
	body := []byte(`{"task_id": 1}`)
	req, err := http.NewRequest(http.MethodPost, ep.url("/hook"), bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("webhook-id", "taskorch-1-1")
	req.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set("webhook-signature", "v1,"+strings.TrimPrefix(newSecret, "whsec_"))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	select {
	case <-ep.out.lineWith(`"event":"bad_signature"`):
	case <-time.After(30 * time.Second):
		t.Fatal("the endpoint did not log the bad signature")
	}
	require.Len(t, ep.events(t, "bad_signature", 0), 1)
}

// The example endpoint of docs/worker.md, run as printed: a task pushed to it completes with the
// greeting it returns; a worker signing with another secret gets a 401, and the task fails
// without retry, the status in its error.
func TestE2EPushDocEndpoint(t *testing.T) {
	t.Parallel()
	secret := pushSecret(t)
	ep := startPushEndpoint(t, "push_endpoint.py", secret)
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	startWorkerProc(t, url, "TASKORCH_WORKER_ID=right", envHTTPTargets+"=push.greet="+ep.url("/"), envHTTPSecrets+"="+secret)
	startWorkerProc(t, url, "TASKORCH_WORKER_ID=wrong", envHTTPTargets+"=push.wrong="+ep.url("/"), envHTTPSecrets+"="+pushSecret(t))

	ok := enqueue(t, pool, "push.greet", `{"name": "Ada"}`, 0)
	bad := enqueue(t, pool, "push.wrong", `{"name": "Eve"}`, 0)
	waitStatus(t, pool, ok, "completed")
	require.JSONEq(t, `{"greeting": "hello Ada"}`, pushResult(t, pool, ok))
	waitStatus(t, pool, bad, "failed")
	require.Equal(t, 1, q[int](t, pool, `select attempt from queues.task where task_id = $1`, bad))
	require.Contains(t, q[string](t, pool, `select last_error from queues.task where task_id = $1`, bad),
		`HTTP 401 Unauthorized: {"error": "bad signature"} (a 4xx is not retried)`)
}

// Cancelling a pushed task aborts its request: the endpoint, holding its answer back, sees the
// connection closed; the task stays cancelled and its slot serves the next task.
func TestE2EPushCancelAbortsTheRequest(t *testing.T) {
	t.Parallel()
	secret := pushSecret(t)
	ep := startPushEndpoint(t, "push_server.py", secret)
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	w := startWorkerProc(t, url, "TASKORCH_CONCURRENCY=1", envHTTPTargets+"=push.test="+ep.url("/"), envHTTPSecrets+"="+secret,
		"TASKORCH_HTTP_TIMEOUT=10m")

	id := enqueue(t, pool, "push.test", `{"mode": "hang"}`, 0)
	ep.waitEvent(t, "request", id)
	stopped := w.out.lineWith(`"msg":"task stopped without an outcome"`, fmt.Sprintf(`"task_id":%d,`, id))
	aborted := ep.out.lineWith(`"event":"aborted"`, fmt.Sprintf(`"task_id":%d,`, id))
	r := runBinary(t, []string{"DATABASE_URL=" + url}, "tasks", "cancel", strconv.FormatInt(id, 10))
	returned := time.Now()
	require.Equal(t, 0, r.code, r.err)
	select {
	case <-aborted:
		t.Logf("the endpoint saw the request aborted %s after the cancel command returned", time.Since(returned))
	case <-time.After(30 * time.Second):
		t.Fatalf("the endpoint did not see the request aborted:\n%s", ep.out.String())
	}
	select {
	case line := <-stopped:
		require.Contains(t, line, "the task was cancelled")
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop the cancelled task")
	}
	next := enqueue(t, pool, "push.test", `{"mode": "empty"}`, 0)
	waitStatus(t, pool, next, "completed")
	require.Equal(t, "cancelled", q[string](t, pool, `select status::text from queues.task where task_id = $1`, id))
	require.Len(t, ep.events(t, "request", id), 1)
}

// A worker SIGKILLed while its push request is in flight: its lease is recovered (its session is
// gone), the task is pushed again by the other worker under a new lease, as attempt 2, and
// completes once, under that lease.
func TestE2EPushWorkerKilledMidCall(t *testing.T) {
	t.Parallel()
	secret := pushSecret(t)
	ep := startPushEndpoint(t, "push_server.py", secret)
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	completionLedger(t, pool)
	env := []string{envHTTPTargets + "=push.test=" + ep.url("/"), envHTTPSecrets + "=" + secret, "TASKORCH_HTTP_TIMEOUT=10m"}
	victim := startWorkerProc(t, url, append([]string{"TASKORCH_WORKER_ID=victim"}, env...)...)
	waitFor(t, pool, "the victim registered", `select exists (select from queues.worker where worker_id = 'victim' and session_key is not null)`)

	id := enqueue(t, pool, "push.test", `{"mode": "hang-first"}`, 0)
	ep.waitEvent(t, "request", id)
	victim.signal(t, syscall.SIGKILL)
	victim.wait(t)
	ep.waitEvent(t, "aborted", id) // the kernel closed the dead worker's connection

	startWorkerProc(t, url, append([]string{"TASKORCH_WORKER_ID=steady"}, env...)...)
	waitStatus(t, pool, id, "completed")
	ep.waitCalls(t, id, 2)
	requireCompletedOnce(t, pool, []int64{id})
	rel := releasesOf(t, pool, "victim", []int64{id})
	require.NotEmpty(t, rel)
	for _, r := range rel {
		require.Equal(t, "recovered:session_lost", r.how)
	}
	reqs := ep.events(t, "request", id)
	require.Len(t, reqs, 2)
	require.Equal(t, 1, reqs[0].Attempt)
	require.Equal(t, 2, reqs[1].Attempt)
	require.NotEqual(t, reqs[0].IdempotencyKey, reqs[1].IdempotencyKey)
	require.Equal(t, strconv.FormatInt(q[int64](t, pool, `select lease_id from queues.task where task_id = $1`, id), 10), reqs[1].IdempotencyKey,
		"completed under the second push's lease")
	require.JSONEq(t, `{"calls": 2}`, pushResult(t, pool, id))
}
