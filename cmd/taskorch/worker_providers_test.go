package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/providers"
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

// checkProviders finds each missing or malformed setting of a chosen provider, naming its
// variable, without a database or a network; a complete configuration passes.
func TestCheckProviders(t *testing.T) {
	t.Parallel()
	resend := map[string]string{"TASKORCH_EMAIL_PROVIDER": "resend", "TASKORCH_RESEND_API_KEY": "re_s3cr3t", "TASKORCH_EMAIL_FROM": "a@example.com"}
	smtp := map[string]string{"TASKORCH_EMAIL_PROVIDER": "smtp", "TASKORCH_SMTP_URL": "smtp://u:s3cr3t@mail.example.com", "TASKORCH_EMAIL_FROM": "a@example.com"}
	twilio := map[string]string{"TASKORCH_SMS_PROVIDER": "twilio", "TASKORCH_TWILIO_ACCOUNT_SID": "AC123", "TASKORCH_TWILIO_AUTH_TOKEN": "s3cr3t", "TASKORCH_TWILIO_FROM": "+15550001111"}
	httpSigner := map[string]string{"TASKORCH_FILES_SIGNER": "http", "TASKORCH_FILES_SIGNER_URL": "https://files.internal/sign"}
	s3 := map[string]string{"TASKORCH_FILES_SIGNER": "s3", "TASKORCH_S3_ACCESS_KEY_ID": "AKID", "TASKORCH_S3_SECRET_ACCESS_KEY": "s3cr3t"}
	without := func(m map[string]string, name string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if k != name {
				out[k] = v
			}
		}
		return out
	}
	with := func(m map[string]string, name, value string) map[string]string {
		out := without(m, name)
		out[name] = value
		return out
	}
	for _, complete := range []map[string]string{resend, smtp, twilio, httpSigner, s3,
		{"TASKORCH_EMAIL_PROVIDER": "outbox", "TASKORCH_SMS_PROVIDER": "outbox", "TASKORCH_FILES_SIGNER": "outbox"}, {}} {
		require.NoError(t, checkProviders(providerConfig(t, complete)), complete)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{without(resend, "TASKORCH_RESEND_API_KEY"), "TASKORCH_EMAIL_PROVIDER=resend needs TASKORCH_RESEND_API_KEY"},
		{without(resend, "TASKORCH_EMAIL_FROM"), "TASKORCH_EMAIL_PROVIDER=resend needs TASKORCH_EMAIL_FROM"},
		{without(smtp, "TASKORCH_SMTP_URL"), "TASKORCH_EMAIL_PROVIDER=smtp needs TASKORCH_SMTP_URL"},
		{without(smtp, "TASKORCH_EMAIL_FROM"), "TASKORCH_EMAIL_PROVIDER=smtp needs TASKORCH_EMAIL_FROM"},
		{with(smtp, "TASKORCH_SMTP_URL", "http://u:s3cr3t@mail.example.com"), "TASKORCH_SMTP_URL"},
		{without(twilio, "TASKORCH_TWILIO_ACCOUNT_SID"), "TASKORCH_SMS_PROVIDER=twilio needs TASKORCH_TWILIO_ACCOUNT_SID"},
		{without(twilio, "TASKORCH_TWILIO_AUTH_TOKEN"), "TASKORCH_SMS_PROVIDER=twilio needs TASKORCH_TWILIO_AUTH_TOKEN"},
		{without(twilio, "TASKORCH_TWILIO_FROM"), "TASKORCH_SMS_PROVIDER=twilio needs TASKORCH_TWILIO_FROM"},
		{with(twilio, "TASKORCH_TWILIO_ACCOUNT_SID", "AC-1!"), "TASKORCH_TWILIO_ACCOUNT_SID"},
		{without(httpSigner, "TASKORCH_FILES_SIGNER_URL"), "TASKORCH_FILES_SIGNER=http needs TASKORCH_FILES_SIGNER_URL"},
		{with(httpSigner, "TASKORCH_FILES_SIGNER_URL", "files.internal/sign"), "TASKORCH_FILES_SIGNER_URL is not an http(s) URL"},
		{without(s3, "TASKORCH_S3_ACCESS_KEY_ID"), "TASKORCH_FILES_SIGNER=s3 needs TASKORCH_S3_ACCESS_KEY_ID"},
		{without(s3, "TASKORCH_S3_SECRET_ACCESS_KEY"), "TASKORCH_FILES_SIGNER=s3 needs TASKORCH_S3_SECRET_ACCESS_KEY"},
		{with(s3, "TASKORCH_S3_ENDPOINT", "127.0.0.1:9000"), "TASKORCH_S3_ENDPOINT"},
	} {
		err := checkProviders(providerConfig(t, tc.env))
		require.ErrorContains(t, err, tc.want, tc.env)
		require.NotContains(t, err.Error(), "s3cr3t")
	}
}

func providerConfig(t *testing.T, env map[string]string) providers.Config {
	t.Helper()
	cfg, err := providers.ConfigFromEnv(func(name string) string { return env[name] })
	require.NoError(t, err)
	return cfg
}

// `taskorch worker` with a provider that cannot work exits 2 at once with the missing
// variable's name, before it tries the database; the secret it was given is not printed.
func TestE2EWorkerRefusesBrokenProvider(t *testing.T) {
	t.Parallel()
	r := runBinary(t, []string{"DATABASE_URL=postgres://u:db-s3cr3t@127.0.0.1:1/db", "TASKORCH_EMAIL_PROVIDER=resend",
		"TASKORCH_RESEND_API_KEY=re_s3cr3t", "TASKORCH_EMAIL_FROM=", "TASKORCH_SMS_PROVIDER=twilio", "TASKORCH_TWILIO_ACCOUNT_SID=",
		"TASKORCH_TWILIO_AUTH_TOKEN=", "TASKORCH_TWILIO_FROM=", "TASKORCH_FILES_SIGNER="}, "worker")
	require.Equal(t, exitUsage, r.code, r.err)
	for _, want := range []string{"TASKORCH_EMAIL_PROVIDER=resend needs TASKORCH_EMAIL_FROM",
		"TASKORCH_SMS_PROVIDER=twilio needs TASKORCH_TWILIO_ACCOUNT_SID", "TASKORCH_SMS_PROVIDER=twilio needs TASKORCH_TWILIO_AUTH_TOKEN",
		"TASKORCH_SMS_PROVIDER=twilio needs TASKORCH_TWILIO_FROM"} {
		require.Contains(t, r.err, want)
	}
	require.True(t, strings.HasPrefix(r.err, "taskorch: channel providers: "), r.err)
	require.NotContains(t, r.err, "database", "it stops before it tries the database")
	require.NotContains(t, r.err, "s3cr3t")
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
// for good (not retried), and the sms task, its channel off, is not claimed.
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

	sms := enqueue(t, pool, "sms", `{"to":"+15551234567","body":"hi"}`, 1) // first in claim order
	sent := enqueue(t, pool, "email", `{"to":"ada@example.com","subject":"Hi","text":"Hello"}`, 3)
	refused := enqueue(t, pool, "email", `{"to":"bad@example.com","subject":"Hi","text":"Hello"}`, 3)

	waitStatus(t, pool, sent, "completed")
	mu.Lock()
	require.Equal(t, []string{"taskorch-task-" + itoa(sent)}, keys)
	mu.Unlock()

	waitStatus(t, pool, refused, "failed")
	require.Equal(t, 1, q[int](t, pool, `select attempt from queues.task where task_id = $1`, refused), "a 4xx is not retried")
	require.Contains(t, lastErr(t, pool, refused), "resend: 422 validation_error: The to address is on the suppression list.")

	// The channel without a provider is off: its task was passed over, not claimed.
	require.Equal(t, "pending 0", q[string](t, pool, `select format('%s %s', status, attempt) from queues.task where task_id = $1`, sms))
	require.NotContains(t, w.out.String(), "re_e2e_key", "the API key must not reach the log")
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
