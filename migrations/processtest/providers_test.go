package processtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/s3test"
	"github.com/taskorch/taskorch/providers"
)

// The file-deletion process against a real S3-compatible gateway that checks signatures, with
// the worker presigning the DELETE itself (TASKORCH_FILES_SIGNER=s3): the object is gone and the
// file marked deleted.
func TestFileDeletionS3Gateway(t *testing.T) {
	t.Parallel()
	gw := s3test.Start(t)
	gw.CreateBucket(t, "uploads")
	gw.PutObject(t, "uploads", "rec/1.wav", "RIFF....")
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	signer, err := providers.NewS3Signer(providers.S3SignerConfig{Endpoint: gw.Endpoint, Region: s3test.Region,
		AccessKeyID: s3test.AccessKeyID, SecretAccessKey: s3test.SecretAccessKey})
	require.NoError(t, err)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: signer})

	file := scalar[int64](t, pool, `insert into files.file (bucket, object_key) values ('uploads', 'rec/1.wav') returning file_id`)
	id := scalar[int64](t, pool, `select file_deletion_task_id from files.kickoff_file_deletion($1)`, file)
	waitTrue(t, pool, "deleted", `select exists (select 1 from files.file_deletion_task_succeeded where file_deletion_task_id = $1)`, id)
	require.False(t, gw.ObjectExists(t, "uploads", "rec/1.wav"), "the object is gone from the store")
	require.True(t, scalar[bool](t, pool, `select (metadata->>'deleted')::boolean from files.file where file_id = $1`, file))
	require.Equal(t, 1, scalar[int](t, pool, `select files.count_file_deletion_attempts($1)`, id))
	require.Equal(t, `"s3"`, scalar[string](t, pool, `select (s.provider_response->'provider')::text from files.file_deletion_attempt a
		join files.file_deletion_attempt_succeeded s using (file_deletion_attempt_id) where a.file_deletion_task_id = $1`, id))
}

// The files service (TASKORCH_FILES_SIGNER=http) hands out a tampered URL: the gateway refuses
// it (403, the signature does not match), a permanent failure: the attempt is recorded as failed
// with that reason, the object stays, and the process is stuck and terminal at once, after 1 of
// its 2 attempts.
func TestFileDeletionTamperedURLRefused(t *testing.T) {
	t.Parallel()
	gw := s3test.Start(t)
	gw.CreateBucket(t, "uploads")
	gw.PutObject(t, "uploads", "keep/me.txt", "precious")
	gw.PutObject(t, "uploads", "other.txt", "not this one")
	signer, err := providers.NewS3Signer(providers.S3SignerConfig{Endpoint: gw.Endpoint, Region: s3test.Region,
		AccessKeyID: s3test.AccessKeyID, SecretAccessKey: s3test.SecretAccessKey})
	require.NoError(t, err)
	// A files service that signs a DELETE of the file, then swaps the key for another object's:
	// the signature no longer matches the request.
	var signed sync.Map
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req providers.SignRequest
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &req) != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		u, headers, err := signer.Presign(r.Context(), req.Bucket, req.ObjectKey)
		if err != nil {
			http.Error(w, `{"error":"sign"}`, http.StatusInternalServerError)
			return
		}
		signed.Store(req.ObjectKey, true)
		_ = json.NewEncoder(w).Encode(providers.SignResponse{URL: strings.Replace(u, "/keep/me.txt", "/other.txt", 1), Headers: headers})
	}))
	t.Cleanup(files.Close)
	httpSigner, err := providers.NewHTTPSigner(providers.HTTPSignerConfig{URL: files.URL})
	require.NoError(t, err)

	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: httpSigner})
	file := scalar[int64](t, pool, `insert into files.file (bucket, object_key) values ('uploads', 'keep/me.txt') returning file_id`)
	id := scalar[int64](t, pool, `select file_deletion_task_id from files.kickoff_file_deletion($1)`, file)
	waitTrue(t, pool, "stuck", `select exists (select 1 from files.file_deletion_task_failed where file_deletion_task_id = $1)`, id)
	quiet(t, pool, "file_deletion_task_id", id)

	_, ok := signed.Load("keep/me.txt")
	require.True(t, ok, "the files service was asked to sign the file's key")
	require.True(t, gw.ObjectExists(t, "uploads", "keep/me.txt"))
	require.True(t, gw.ObjectExists(t, "uploads", "other.txt"), "the tampered URL deleted nothing")
	require.True(t, scalar[bool](t, pool, `select files.is_file_deletion_stuck($1)`, file))
	require.False(t, scalar[bool](t, pool, `select metadata ? 'deleted' from files.file where file_id = $1`, file))
	failures := scalar[[]string](t, pool, `select array_agg(f.error_message order by f.file_deletion_attempt_id) from files.file_deletion_attempt a
		join files.file_deletion_attempt_failed f using (file_deletion_attempt_id) where a.file_deletion_task_id = $1`, id)
	require.Len(t, failures, 1)
	require.Equal(t, []string{"permanent"}, failureClasses(t, pool, "files", "file_deletion", id))
	for _, msg := range failures {
		require.Contains(t, msg, "403")
		require.Contains(t, msg, "SignatureDoesNotMatch")
		require.NotContains(t, msg, "X-Amz-Signature=", "the signed URL's secret parts are not recorded")
	}
}

// resendStub answers the Resend API's POST /emails with the scripted responses in order (then
// 200), keeping each request's Idempotency-Key.
type resendStub struct {
	mu        sync.Mutex
	responses []stubResponse
	keys      []string
}

type stubResponse struct {
	status     int
	body       string
	retryAfter string // the Retry-After header, when set
}

func (s *resendStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.keys)
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	resp := stubResponse{200, `{"id":"4ef9a417-02e9-4d39-ad75-9611e0fcc33c"}`, ""}
	if n < len(s.responses) {
		resp = s.responses[n]
	}
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/emails" || r.Header.Get("Authorization") != "Bearer re_test_key" {
		http.Error(w, `{"statusCode":401,"name":"missing_api_key","message":"Missing API key in the authorization header."}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.retryAfter != "" {
		w.Header().Set("Retry-After", resp.retryAfter)
	}
	w.WriteHeader(resp.status)
	_, _ = io.WriteString(w, resp.body)
}

// Retriable answers from the provider, each recorded clearly against its attempt: a 5xx and a
// 200 whose body cannot be parsed. The process retries after each and ends with one success. (A
// 4xx is permanent and ends the process at once: TestSendEmailPermanentFailureEndsAtOnce.)
func TestSendEmailProviderErrorsRecorded(t *testing.T) {
	t.Parallel()
	stub := &resendStub{responses: []stubResponse{
		{500, `{"statusCode":500,"name":"internal_server_error","message":"An unexpected error occurred."}`, ""},
		{200, `<html>gateway timeout</html>`, ""},
	}}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	resend, err := providers.NewResend(providers.ResendConfig{APIKey: "re_test_key", BaseURL: srv.URL, From: "noreply@example.com"})
	require.NoError(t, err)
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: resend})

	id := scalar[int64](t, pool, `select comms.send_email('ann@example.com', 'Hi', 'text')`)
	waitTrue(t, pool, "sent", `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, id)
	failures := scalar[[]string](t, pool, `select array_agg(f.error_message order by f.send_email_attempt_id) from comms.send_email_attempt a
		join comms.send_email_attempt_failed f using (send_email_attempt_id) where a.send_email_task_id = $1`, id)
	require.Len(t, failures, 2)
	require.Contains(t, failures[0], "resend: 500 internal_server_error")
	require.Contains(t, failures[1], "could not parse the provider's response")
	for _, f := range failures {
		require.NotContains(t, f, "re_test_key")
	}
	require.Equal(t, []string{"retriable", "retriable"}, failureClasses(t, pool, "comms", "send_email", id))
	require.Equal(t, 3, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, id))
	// Each attempt carried its own idempotency key, derived from the attempt.
	require.Len(t, stub.keys, 3)
	require.Regexp(t, `^comms-send-email-attempt-\d+$`, stub.keys[0])
	require.NotEqual(t, stub.keys[0], stub.keys[1])
}

// Resend answers 429 (rate_limit_exceeded, Retry-After: 1) once: that is not a failed attempt.
// The channel task waits the second and sends again under the same attempt, its error handler
// not called, and the process ends with 1 attempt, 0 failed, 1 succeeded.
func TestSendEmailRateLimitedOnce(t *testing.T) {
	t.Parallel()
	stub := &resendStub{responses: []stubResponse{
		{429, `{"statusCode":429,"name":"rate_limit_exceeded","message":"Too many requests. You can only make 2 requests per second."}`, "1"},
	}}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	resend, err := providers.NewResend(providers.ResendConfig{APIKey: "re_test_key", BaseURL: srv.URL, From: "noreply@example.com"})
	require.NoError(t, err)
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: resend})

	id := scalar[int64](t, pool, `select comms.send_email('ann@example.com', 'Hi', 'text')`)
	waitTrue(t, pool, "sent", `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, id)
	require.Equal(t, 1, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, id))
	require.Equal(t, 0, scalar[int](t, pool, `select comms.count_send_email_failed_attempts($1)`, id))
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from comms.send_email_attempt a
		join comms.send_email_attempt_succeeded s using (send_email_attempt_id) where a.send_email_task_id = $1`, id))

	// The provider saw the request twice, under the attempt's one idempotency key, a second apart.
	require.Len(t, stub.keys, 2)
	require.Equal(t, stub.keys[0], stub.keys[1])
	channel := scalar[int64](t, pool, `select task_id from comms.send_email_attempt where send_email_task_id = $1`, id)
	require.Equal(t, "completed", scalar[string](t, pool, `select status::text from queues.task where task_id = $1`, channel))
	require.Equal(t, []string{"claimed", "snoozed", "claimed", "completed"},
		scalar[[]string](t, pool, `select array_agg(event order by occurred_at, step, source_id) from queues.task_history where task_id = $1`, channel))
	require.Equal(t, 1, scalar[int](t, pool, `select attempt from queues.task where task_id = $1`, channel), "no attempt spent")
	require.True(t, scalar[bool](t, pool, `select max(occurred_at) filter (where event = 'claimed') - min(occurred_at) >= interval '1 second'
		from queues.task_history where task_id = $1`, channel), "it waited as Retry-After said")
}

// A before handler that answers success: false fails each attempt with its message; the process
// still ends, with a terminal failure that quotes it.
func TestSendEmailBeforeHandlerRefuses(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	mustExec(t, pool, `create or replace function comms.get_email_payload(_payload jsonb) returns jsonb
		language sql stable security definer set search_path = pg_catalog, pg_temp as $$
		select jsonb_build_object('success', false, 'validation_failure_message', 'the template welcome_v2 is missing') $$`)
	email := &scripted{}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: email})

	id := scalar[int64](t, pool, `select comms.send_email('ann@example.com', 'Hi', 'text')`)
	waitTrue(t, pool, "given up", `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, id)
	quiet(t, pool, "send_email_task_id", id)
	require.Empty(t, email.Calls(), "the provider is never called")
	require.Contains(t, scalar[string](t, pool, `select error_message from comms.send_email_task_failed where send_email_task_id = $1`, id),
		"before handler comms.get_email_payload: validation failure: the template welcome_v2 is missing")
	require.Equal(t, 2, scalar[int](t, pool, `select count(*)::int from queues.error e join queues.task t using (task_id)
		where t.task_type = 'email' and e.error_message like '%template welcome_v2 is missing%'`))
}
