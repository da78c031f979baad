package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/dbtest"
)

// A provider chosen without its settings stops the worker at start (exit 2) with a message
// naming the variable, before it touches the database; no secret is printed.
func TestWorkerProviderConfigErrors(t *testing.T) {
	t.Parallel()
	noDB := "postgres://taskorch@127.0.0.1:1/none"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--email-provider", "resend"}, "TASKORCH_EMAIL_PROVIDER=resend needs TASKORCH_RESEND_API_KEY"},
		{[]string{"--sms-provider", "sns"}, `TASKORCH_SMS_PROVIDER="sns": want outbox, twilio`},
		{[]string{"--files-signer", "s3", "--s3-access-key-id", "AKID"}, "TASKORCH_FILES_SIGNER=s3 needs TASKORCH_S3_SECRET_ACCESS_KEY"},
		{[]string{"--email-provider", "smtp", "--smtp-url", "smtp://u:hunter2secret@h?tls=on"}, `TASKORCH_SMTP_URL: unknown parameter "tls"`},
		{[]string{"--provider-timeout", "soon"}, `TASKORCH_PROVIDER_TIMEOUT="soon"`},
	} {
		r := run(t, append([]string{"worker", "--database-url", noDB}, tt.args...)...)
		require.Equal(t, 2, r.code, r.err)
		require.Contains(t, r.err, tt.want)
		require.NotContains(t, r.err, "hunter2secret")
	}
}

func TestWorkerProviderFlagsInHelp(t *testing.T) {
	t.Parallel()
	r := run(t, "worker", "--help")
	require.Equal(t, 0, r.code, r.err)
	for _, want := range []string{"--email-provider string", "(env TASKORCH_EMAIL_PROVIDER)", "--resend-api-key string",
		"--twilio-auth-token string", "--files-signer string", "--s3-secret-access-key string", "(env TASKORCH_SMTP_URL)"} {
		require.Contains(t, r.out, want)
	}
}

// A worker process with the email channel on Resend (a local stand-in for its API) and no sms
// provider: the email task is sent once with the task's idempotency key, a 422 fails its task
// for good (not retried), and the sms task fails, not retried, with a message naming
// TASKORCH_SMS_PROVIDER.
func TestE2EWorkerChannelProviders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			To []string `json:"to"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer re_e2e_key" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if len(body.To) == 1 && body.To[0] == "bad@example.com" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"statusCode":422,"name":"validation_error","message":"The to address is on the suppression list."}`)
			return
		}
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		_, _ = io.WriteString(w, `{"id":"e2e-email-1"}`)
	}))
	t.Cleanup(api.Close)

	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	w := startWorkerProc(t, url,
		"TASKORCH_EMAIL_PROVIDER=resend", "TASKORCH_RESEND_API_KEY=re_e2e_key", "TASKORCH_RESEND_BASE_URL="+api.URL,
		"TASKORCH_EMAIL_FROM=noreply@example.com", "TASKORCH_SMS_PROVIDER=", "TASKORCH_FILES_SIGNER=")

	sent := enqueue(t, pool, "email", `{"to":"ada@example.com","subject":"Hi","text":"Hello"}`, 3)
	refused := enqueue(t, pool, "email", `{"to":"bad@example.com","subject":"Hi","text":"Hello"}`, 3)
	sms := enqueue(t, pool, "sms", `{"to":"+15551234567","body":"hi"}`, 1)

	waitStatus(t, pool, sent, "completed")
	mu.Lock()
	require.Equal(t, []string{"taskorch-task-" + itoa(sent)}, keys)
	mu.Unlock()

	waitStatus(t, pool, refused, "failed")
	require.Equal(t, 1, q[int](t, pool, `select attempt from queues.task where task_id = $1`, refused), "a 4xx is not retried")
	require.Contains(t, lastErr(t, pool, refused), "resend: 422 validation_error: The to address is on the suppression list.")

	waitStatus(t, pool, sms, "failed")
	require.Contains(t, lastErr(t, pool, sms), "no provider is configured for the sms channel on this worker (see TASKORCH_SMS_PROVIDER)")
	require.NotContains(t, w.out.String(), "re_e2e_key", "the API key must not reach the log")
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
