package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // Twilio's scheme
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

const e2eWebhookSecret = "whsec_dGFza29yY2gtZTJlLXdlYmhvb2stc2VjcmV0"

// post sends body to u with headers and returns the status and the body.
func post(t *testing.T, u, contentType, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, strings.TrimSpace(string(b))
}

// svixHeaders signs body now as Svix documents it.
func svixHeaders(t *testing.T, secret, id, body string) map[string]string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + body))
	return map[string]string{"svix-id": id, "svix-timestamp": ts, "svix-signature": "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))}
}

// twilioHeader signs form for u as Twilio documents it.
func twilioHeader(token, u string, form url.Values) map[string]string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := u
	for _, k := range keys {
		s += k + form.Get(k)
	}
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(s))
	return map[string]string{"X-Twilio-Signature": base64.StdEncoding.EncodeToString(mac.Sum(nil))}
}

// The whole path through a real worker process: it sends an email through Resend's API (a
// local server speaking it), its success handler stores Resend's id, and a signed email.bounced
// posted to the worker's /webhooks/resend records the bounce on that attempt and signals the
// process, waking a task that waits for it. A tampered callback is refused and recorded.
func TestE2EWebhooksThroughWorker(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewEmptyDBURL(t)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/emails" || r.Header.Get("Authorization") != "Bearer re_e2e_key" {
			http.Error(w, `{"statusCode": 404, "name": "not_found", "message": "no"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}`)
	}))
	t.Cleanup(api.Close)

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startWorkerProc(t, dbURL, "TASKORCH_HTTP_ADDR="+addr, "TASKORCH_PROCESSES=comms",
		"TASKORCH_EMAIL_PROVIDER=resend", "TASKORCH_RESEND_API_KEY=re_e2e_key", "TASKORCH_RESEND_BASE_URL="+api.URL,
		"TASKORCH_EMAIL_FROM=app@example.com", "TASKORCH_RESEND_WEBHOOK_SECRET="+e2eWebhookSecret,
		"TASKORCH_TWILIO_AUTH_TOKEN=", "TASKORCH_SMS_PROVIDER=")
	base := "http://" + addr
	require.Eventually(t, func() bool { code, _ := get(base + "/readyz"); return code == http.StatusOK },
		60*time.Second, 20*time.Millisecond, "worker ready")
	pool := openPool(t, dbURL)
	// Accepted is not delivered: the process waits for Resend's report (docs/processes.md).
	_, err := pool.Exec(context.Background(), `update comms.process_config set delivery_wait = '1 hour' where process = 'send_email'`)
	require.NoError(t, err)

	id := q[int64](t, pool, `select comms.send_email('a@example.com', 'hello', 'hi')`)
	waitFor(t, pool, "Resend's id stored by the success handler", `select exists (select 1 from comms.send_email_attempt a
		join comms.send_email_attempt_succeeded s using (send_email_attempt_id)
		where a.send_email_task_id = $1 and s.provider_response ->> 'id' = '49a3999c-0ce1-4ea6-ab68-afcd6dc2e794')`, id)
	waiting := q[int64](t, pool, `select queues.enqueue('taskorch.noop', '{}', now() + interval '1 hour')`)
	require.False(t, q[bool](t, pool, `select queues.wait_for_signal('email.bounced', $1, $2)`, strconv.FormatInt(id, 10), waiting))

	bounce := `{"type": "email.bounced", "created_at": "2026-01-02T03:04:05.000Z", "data": {"email_id": "49a3999c-0ce1-4ea6-ab68-afcd6dc2e794",` +
		` "bounce": {"message": "mailbox does not exist", "type": "Permanent", "subType": "General"}}}`
	code, body := post(t, base+"/webhooks/resend", "application/json", bounce, svixHeaders(t, e2eWebhookSecret, "msg_e2e_1", bounce))
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "recorded", body)
	require.Equal(t, "bounced|Permanent/General: mailbox does not exist", q[string](t, pool, `select b.kind || '|' || b.reason
		from comms.send_email_attempt_bounced b join comms.send_email_attempt a using (send_email_attempt_id) where a.send_email_task_id = $1`, id))
	waitStatus(t, pool, waiting, "completed")
	// The bounce ends the email process as failed, with Resend's reason.
	waitFor(t, pool, "the bounce ends the process", `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, id)
	require.Equal(t, "the provider reported the email bounced: Permanent/General: mailbox does not exist",
		q[string](t, pool, `select error_message from comms.send_email_task_failed where send_email_task_id = $1`, id))
	require.False(t, q[bool](t, pool, `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, id))

	// Tampered (signed for another body): refused and recorded; the duplicate: 200, nothing new.
	h := svixHeaders(t, e2eWebhookSecret, "msg_e2e_2", bounce)
	code, body = post(t, base+"/webhooks/resend", "application/json", strings.Replace(bounce, "Permanent", "Transient", 1), h)
	require.Equal(t, http.StatusUnauthorized, code, body)
	require.Equal(t, 1, q[int](t, pool, `select count(*)::int from queues.error where error_message like 'webhook resend refused: the svix-signature does not match%'`))
	code, body = post(t, base+"/webhooks/resend", "application/json", bounce, svixHeaders(t, e2eWebhookSecret, "msg_e2e_1", bounce))
	require.Equal(t, []any{http.StatusOK, "duplicate"}, []any{code, body})

	// No Twilio token: its route says so.
	code, body = post(t, base+"/webhooks/twilio", "application/x-www-form-urlencoded", "MessageSid=SM1", nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "set TASKORCH_TWILIO_AUTH_TOKEN")
}

// `taskorch webhooks` refuses to start without a secret (exit 2), and with the Twilio token
// serves signed status callbacks on its own.
func TestE2EWebhooksCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDBURL(t)
	pool := openPool(t, dbURL)
	_, err := taskorch.Migrate(ctx, pool, &taskorch.MigrateOpts{Processes: []string{"comms"}})
	require.NoError(t, err)

	env := func(extra ...string) []string {
		return append(os.Environ(), append([]string{"DATABASE_URL=" + dbURL, "TASKORCH_RESEND_WEBHOOK_SECRET=",
			"TASKORCH_TWILIO_AUTH_TOKEN=", "TASKORCH_TWILIO_WEBHOOK_URL="}, extra...)...)
	}
	none := exec.Command(taskorchBinary(t), "webhooks", "--addr", "127.0.0.1:0")
	none.Env = env()
	out, err := none.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, string(out))
	require.Equal(t, 2, exit.ExitCode(), string(out))
	require.Contains(t, string(out), "no webhook secret: set TASKORCH_RESEND_WEBHOOK_SECRET, TASKORCH_TWILIO_AUTH_TOKEN or both")

	const token = "e2e0123456789abcdef0123456789abc"
	cmd := exec.Command(taskorchBinary(t), "webhooks", "--addr", "127.0.0.1:0")
	cmd.Env = env("TASKORCH_TWILIO_AUTH_TOKEN=" + token)
	cmd.Stderr = &syncBuffer{}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "stderr: %s", cmd.Stderr)
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "webhooks: ")
	require.True(t, ok, line)
	hook := base + "twilio"

	task := q[int64](t, pool, `select comms.send_sms('+15551234567', 'hi')`)
	attempt := q[int64](t, pool, `insert into comms.send_sms_attempt (send_sms_task_id) values ($1) returning send_sms_attempt_id`, task)
	_, err = pool.Exec(ctx, `insert into comms.send_sms_attempt_succeeded (send_sms_attempt_id, provider_response)
		values ($1, '{"provider": "twilio", "sid": "SMe2e"}')`, attempt)
	require.NoError(t, err)

	form := url.Values{"MessageSid": {"SMe2e"}, "MessageStatus": {"undelivered"}, "ErrorCode": {"30003"}}
	code, body := post(t, hook, "application/x-www-form-urlencoded", form.Encode(), twilioHeader(token, hook, form))
	require.Equal(t, []any{http.StatusOK, "recorded"}, []any{code, body})
	require.Equal(t, "30003", q[string](t, pool, `select error_code from comms.send_sms_attempt_undelivered where send_sms_attempt_id = $1`, attempt))
	require.Equal(t, "30003", q[string](t, pool, `select queues.signal_payload('sms.undelivered', $1) ->> 'error_code'`, strconv.FormatInt(task, 10)))

	code, _ = post(t, hook, "application/x-www-form-urlencoded", form.Encode(), twilioHeader("ffff", hook, form))
	require.Equal(t, http.StatusUnauthorized, code)
	code, body = post(t, base+"resend", "application/json", "{}", nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "set TASKORCH_RESEND_WEBHOOK_SECRET")
}
