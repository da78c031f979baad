package webhooks_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // Twilio's scheme
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/webhooks"
)

// testSecret is a Resend signing secret as Resend shows one: whsec_ and 24 random bytes in base64.
const (
	testSecret  = "whsec_dGFza29yY2gtdGVzdC1zaWduaW5nLWtleQ=="
	otherSecret = "whsec_c29tZWJvZHktZWxzZXMta2V5LWhlcmU="
	testToken   = "0123456789abcdef0123456789abcdef"
)

// server is a webhook handler over a database of the test's own, served on 127.0.0.1.
type server struct {
	pool *pgxpool.Pool
	h    *webhooks.Handler
	srv  *httptest.Server
	logs *syncBuffer
}

func newServer(t testing.TB, cfg webhooks.Config) *server {
	t.Helper()
	s := &server{pool: dbtest.NewDB(t), logs: &syncBuffer{}}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(s.logs, nil))
	}
	h, err := webhooks.NewHandler(s.pool, cfg)
	require.NoError(t, err)
	s.h = h
	s.srv = httptest.NewServer(h) // listens on 127.0.0.1
	t.Cleanup(s.srv.Close)
	return s
}

// signSvix signs a body as Svix documents it: base64(HMAC-SHA256(base64-decoded secret after
// whsec_, id.timestamp.body)), sent as "v1,<signature>".
func signSvix(t testing.TB, secret, id string, ts int64, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + string(body)))
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// signTwilio signs a form as Twilio documents it: base64(HMAC-SHA1(auth token, the full URL
// followed by each POST parameter's name and value, sorted by name)).
func signTwilio(token, fullURL string, form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := fullURL
	for _, k := range keys {
		s += k + form.Get(k)
	}
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

type reply struct {
	status int
	body   string
}

func do(t testing.TB, req *http.Request) reply {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return reply{res.StatusCode, strings.TrimSpace(string(b))}
}

// postResend posts body to /webhooks/resend with the given Svix headers (empty ones left out).
func (s *server) postResend(t testing.TB, body []byte, id, ts, sig string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.srv.URL+"/webhooks/resend", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range map[string]string{"svix-id": id, "svix-timestamp": ts, "svix-signature": sig} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	return do(t, req)
}

// resend posts a Resend event signed now with testSecret.
func (s *server) resend(t testing.TB, id string, body string) reply {
	t.Helper()
	now := time.Now().Unix()
	return s.postResend(t, []byte(body), id, strconv.FormatInt(now, 10), signSvix(t, testSecret, id, now, []byte(body)))
}

// postTwilio posts form to /webhooks/twilio with the given signature (empty: none).
func (s *server) postTwilio(t *testing.T, form url.Values, sig string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.srv.URL+"/webhooks/twilio", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if sig != "" {
		req.Header.Set("X-Twilio-Signature", sig)
	}
	return do(t, req)
}

// twilio posts a status callback signed with testToken for the URL it is posted to.
func (s *server) twilio(t *testing.T, form url.Values) reply {
	t.Helper()
	return s.postTwilio(t, form, signTwilio(testToken, s.srv.URL+"/webhooks/twilio", form))
}

func scalar[T any](t testing.TB, db taskorch.DBTX, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, db.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

func mustExec(t testing.TB, db taskorch.DBTX, sql string, args ...any) {
	t.Helper()
	_, err := db.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// sentEmail makes a send-email process with one attempt Resend accepted under id, as the
// success handler records it, and returns the process's id.
func sentEmail(t testing.TB, db taskorch.DBTX, id string) int64 {
	t.Helper()
	task := scalar[int64](t, db, `select comms.send_email('a@example.com', 's', 't')`)
	attempt := scalar[int64](t, db, `insert into comms.send_email_attempt (send_email_task_id) values ($1) returning send_email_attempt_id`, task)
	mustExec(t, db, `insert into comms.send_email_attempt_succeeded (send_email_attempt_id, provider_response)
		values ($1, jsonb_build_object('provider', 'resend', 'id', $2::text))`, attempt, id)
	return task
}

// sentSMS is sentEmail for an SMS Twilio accepted under sid.
func sentSMS(t *testing.T, db taskorch.DBTX, sid string) int64 {
	t.Helper()
	task := scalar[int64](t, db, `select comms.send_sms('+15551234567', 'hi')`)
	attempt := scalar[int64](t, db, `insert into comms.send_sms_attempt (send_sms_task_id) values ($1) returning send_sms_attempt_id`, task)
	mustExec(t, db, `insert into comms.send_sms_attempt_succeeded (send_sms_attempt_id, provider_response)
		values ($1, jsonb_build_object('provider', 'twilio', 'sid', $2::text))`, attempt, sid)
	return task
}

// written counts every row the handler may cause: the four fact tables, signals, errors.
func written(t *testing.T, db taskorch.DBTX) []int64 {
	t.Helper()
	return scalar[[]int64](t, db, `select array[
		(select count(*) from comms.send_email_attempt_delivered),
		(select count(*) from comms.send_email_attempt_bounced),
		(select count(*) from comms.send_sms_attempt_delivered),
		(select count(*) from comms.send_sms_attempt_undelivered),
		(select count(*) from queues.signal),
		(select count(*) from queues.error)]`)
}

// lastError is the newest queues.error row's message.
func lastError(t *testing.T, db taskorch.DBTX) string {
	t.Helper()
	return scalar[string](t, db, `select error_message from queues.error order by error_id desc limit 1`)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
