package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A worker SIGKILLed after the provider received the email and before the success handler
// committed: the attempt runs again after the lease expires, the provider is called a second
// time with the same idempotency key (which Resend deduplicates), and the success is recorded
// once: one attempt, one success fact, one terminal fact.
func TestE2ECrashAfterProviderCall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys []string
	received := make(chan struct{}, 1)
	release := make(chan struct{})
	resend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		first := len(keys) == 1
		mu.Unlock()
		if first {
			received <- struct{}{}
			<-release // the worker dies while waiting for this answer
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}`)
	}))
	t.Cleanup(func() { close(release); resend.Close() })

	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	env := []string{"TASKORCH_PROCESSES=comms", "TASKORCH_LEASE_DURATION=2s", "TASKORCH_EMAIL_PROVIDER=resend",
		"TASKORCH_RESEND_API_KEY=re_test_key", "TASKORCH_RESEND_BASE_URL=" + resend.URL, "TASKORCH_EMAIL_FROM=noreply@example.com"}
	first := startWorkerProc(t, url, env...)
	waitFor(t, pool, "the comms process installed", `select to_regprocedure('comms.send_email(text,text,text,text,timestamptz)') is not null`)
	_, err := pool.Exec(t.Context(), `update comms.process_config set backoff_base = '100 ms', check_interval = '500 ms'`)
	require.NoError(t, err)
	id := q[int64](t, pool, `select comms.send_email('ann@example.com', 'Welcome', 'Hello')`)

	select {
	case <-received:
	case <-time.After(30 * time.Second):
		t.Fatal("the provider was never called")
	}
	first.signal(t, syscall.SIGKILL)
	first.wait(t)

	startWorkerProc(t, url, env...)
	waitFor(t, pool, "the success fact", `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, id)
	require.Equal(t, 1, q[int](t, pool, `select comms.count_send_email_attempts($1)`, id), "the same attempt ran again; no new one")
	require.Equal(t, 1, q[int](t, pool, `select count(*)::int from comms.send_email_attempt a
		join comms.send_email_attempt_succeeded s using (send_email_attempt_id) where a.send_email_task_id = $1`, id))
	require.Zero(t, q[int](t, pool, `select comms.count_send_email_failed_attempts($1)`, id))
	require.Equal(t, 2, q[int](t, pool, `select count(*)::int from queues.task_lease l join queues.task t using (task_id)
		where t.task_type = 'email' and (t.payload->>'send_email_task_id')::bigint = $1`, id), "claimed twice")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, keys, 2, "the provider was called twice")
	require.Equal(t, keys[0], keys[1], "with the same idempotency key")
	require.Regexp(t, `^comms-send-email-attempt-\d+$`, keys[0])
}
