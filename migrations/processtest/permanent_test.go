package processtest_test

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/internal/testing/mtatest"
	"github.com/taskorch/taskorch/internal/testing/s3test"
	"github.com/taskorch/taskorch/providers"
)

// A permanent failure ends its process at once (docs/processes.md, "Permanent failures"): the
// tests below run each shipped process against a real server or a local server that follows
// the provider's documented protocol, with a budget of several attempts, and check that a
// failure the provider calls permanent spends exactly one, while a retriable one is retried.

// failureClasses returns the error_class of each failed attempt of a process instance, in order.
func failureClasses(t *testing.T, db taskorch.DBTX, schema, name string, id int64) []string {
	t.Helper()
	return scalar[[]string](t, db, `select coalesce(array_agg(f.error_class order by f.`+name+`_attempt_id), '{}')
		from `+schema+`.`+name+`_attempt a join `+schema+`.`+name+`_attempt_failed f using (`+name+`_attempt_id)
		where a.`+name+`_task_id = $1`, id)
}

// The state, attempts and error of an instance, as queues.process_instances lists it.
func listed(t *testing.T, pool *pgxpool.Pool, process string, id int64) (state string, attempts int, errMsg string) {
	t.Helper()
	var e *string
	require.NoError(t, pool.QueryRow(t.Context(), `select state, attempts, error from queues.process_instances(_process => $1, _limit => 10000)
		where instance_id = $2`, process, id).Scan(&state, &attempts, &e))
	if e != nil {
		errMsg = *e
	}
	return state, attempts, errMsg
}

// comms.send_email against a real mail server (Postfix): an unknown recipient of its domain is
// refused at RCPT TO with 550 5.1.1, and the process ends failed after exactly 1 of its 3
// attempts, saying the failure was permanent; a known recipient gets the message, multipart
// (text and HTML), with the Message-ID the provider recorded.
func TestSendEmailRealMailServer(t *testing.T) {
	t.Parallel()
	mta := mtatest.Start(t, "ann")
	smtp, err := providers.NewSMTP(providers.SMTPConfig{URL: mta.URL(), From: "Taskorch <noreply@sender.test>"})
	require.NoError(t, err)
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: smtp})

	known := scalar[int64](t, pool, `select comms.send_email($1, 'Welcome', 'Hello Ann', '<p>Hello <b>Ann</b></p>')`, mta.Address("ann"))
	unknown := scalar[int64](t, pool, `select comms.send_email($1, 'Welcome', 'Hello Bob', '<p>Hello <b>Bob</b></p>')`, mta.Address("bob"))
	waitTrue(t, pool, "the unknown recipient's email failed",
		`select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, unknown)
	waitTrue(t, pool, "the known recipient's email sent",
		`select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, known)
	quiet(t, pool, "send_email_task_id", unknown)
	quiet(t, pool, "send_email_task_id", known)

	// The unknown recipient: one attempt, refused permanently, and the process says so.
	require.Equal(t, 1, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, unknown), "exactly 1 attempt of 3")
	require.Equal(t, []string{"permanent"}, failureClasses(t, pool, "comms", "send_email", unknown))
	attemptErr := scalar[string](t, pool, `select f.error_message from comms.send_email_attempt a
		join comms.send_email_attempt_failed f using (send_email_attempt_id) where a.send_email_task_id = $1`, unknown)
	require.Contains(t, attemptErr, "email provider: smtp: 550")
	require.Contains(t, attemptErr, "5.1.1 <bob@taskorch.test>: Recipient address rejected")
	failed := scalar[string](t, pool, `select error_message from comms.send_email_task_failed where send_email_task_id = $1`, unknown)
	require.Equal(t, "permanent: email not sent: "+attemptErr, failed)
	require.True(t, scalar[bool](t, pool, `select comms.is_send_email_stuck($1)`, unknown))
	state, attempts, errMsg := listed(t, pool, "comms.send_email", unknown)
	require.Equal(t, "failed", state)
	require.Equal(t, 1, attempts)
	require.Equal(t, failed, errMsg)
	require.Empty(t, mta.Messages(t, "bob"))

	// The known recipient: delivered once, as the provider built it.
	require.Equal(t, 1, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, known))
	messageID := scalar[string](t, pool, `select s.provider_response ->> 'message_id' from comms.send_email_attempt a
		join comms.send_email_attempt_succeeded s using (send_email_attempt_id) where a.send_email_task_id = $1`, known)
	msgs := mta.WaitMessages(t, "ann", 1)
	require.Len(t, msgs, 1)
	m, err := mail.ReadMessage(strings.NewReader(msgs[0]))
	require.NoError(t, err)
	require.Equal(t, messageID, m.Header.Get("Message-Id"))
	require.Equal(t, "Welcome", m.Header.Get("Subject"))
	require.Equal(t, "ann@taskorch.test", m.Header.Get("Delivered-To"))
	mediaType, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/alternative", mediaType)
	parts := map[string]string{}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		var body io.Reader = p
		if p.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
			body = quotedprintable.NewReader(p) // multipart.Reader decodes it itself only without the header
		}
		b, err := io.ReadAll(body)
		require.NoError(t, err)
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		parts[ct] = string(b)
	}
	require.Equal(t, "Hello Ann", strings.TrimSpace(parts["text/plain"]))
	require.Equal(t, "<p>Hello <b>Ann</b></p>", strings.TrimSpace(parts["text/html"]))
}

// comms.send_email against the Resend-protocol server: a 422 (validation_error) ends the process
// after 1 of its 3 attempts, with one request sent; once the data is fixed, a retry by hand
// starts run 2, which sends.
func TestSendEmailPermanentFailureEndsAtOnce(t *testing.T) {
	t.Parallel()
	stub := &resendStub{responses: []stubResponse{
		{422, `{"statusCode":422,"name":"validation_error","message":"Invalid ` + "`to`" + ` field."}`, ""},
	}}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	resend, err := providers.NewResend(providers.ResendConfig{APIKey: "re_test_key", BaseURL: srv.URL, From: "noreply@example.com"})
	require.NoError(t, err)
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: resend})

	id := scalar[int64](t, pool, `select comms.send_email('ann@example.com', 'Hi', 'text')`)
	waitTrue(t, pool, "failed", `select exists (select 1 from comms.send_email_task_failed where send_email_task_id = $1)`, id)
	quiet(t, pool, "send_email_task_id", id)
	require.Equal(t, 1, scalar[int](t, pool, `select comms.count_send_email_attempts($1)`, id), "exactly 1 attempt of 3")
	require.Equal(t, []string{"permanent"}, failureClasses(t, pool, "comms", "send_email", id))
	require.Equal(t, "permanent: email not sent: email provider: resend: 422 validation_error: Invalid `to` field.",
		scalar[string](t, pool, `select error_message from comms.send_email_task_failed where send_email_task_id = $1`, id))
	stub.mu.Lock()
	require.Len(t, stub.keys, 1, "one request reached the provider")
	stub.mu.Unlock()

	// Retried by hand (the stub now accepts): run 2 makes a new attempt and sends.
	require.Equal(t, 2, scalar[int](t, pool, `select run from queues.retry_process('comms.send_email', $1, 'address corrected')`, id))
	waitTrue(t, pool, "sent", `select exists (select 1 from comms.send_email_task_succeeded where send_email_task_id = $1)`, id)
	state, attempts, _ := listed(t, pool, "comms.send_email", id)
	require.Equal(t, "succeeded", state)
	require.Equal(t, 2, attempts)
	require.False(t, scalar[bool](t, pool, `select comms.is_send_email_stuck($1)`, id))
}

// twilioStub follows Twilio's Create Message API (POST
// /2010-04-01/Accounts/{AccountSid}/Messages.json, basic auth, form fields): it refuses
// invalidNumber with 400 and Twilio's error 21211, answers the first request for any other
// number 503 (error 20500), and then 201 with the Message resource.
type twilioStub struct {
	mu    sync.Mutex
	calls map[string]int
}

const (
	stubAccountSID = "AC0123456789abcdef0123456789abcdef"
	stubAuthToken  = "TwilioToken9f8e7d6c5b4a"
	invalidNumber  = "+15005550001"
)

func (s *twilioStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	user, pass, ok := r.BasicAuth()
	if !ok || user != stubAccountSID || pass != stubAuthToken || r.Method != http.MethodPost ||
		r.URL.Path != "/2010-04-01/Accounts/"+stubAccountSID+"/Messages.json" || r.ParseForm() != nil {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"code":20003,"message":"Authenticate","more_info":"https://www.twilio.com/docs/errors/20003","status":401}`)
		return
	}
	to := r.PostForm.Get("To")
	s.mu.Lock()
	s.calls[to]++
	n := s.calls[to]
	s.mu.Unlock()
	switch {
	case to == invalidNumber:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"code":21211,"message":"The 'To' number `+to+` is not a valid phone number.","more_info":"https://www.twilio.com/docs/errors/21211","status":400}`)
	case n == 1:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"code":20500,"message":"Internal Server Error","more_info":"https://www.twilio.com/docs/errors/20500","status":503}`)
	default:
		w.WriteHeader(http.StatusCreated)
		body, _ := json.Marshal(map[string]any{"account_sid": stubAccountSID, "api_version": "2010-04-01", "body": r.PostForm.Get("Body"),
			"direction": "outbound-api", "from": r.PostForm.Get("From"), "to": to, "num_segments": "1",
			"sid": "SM0123456789abcdef0123456789abcdef", "status": "queued"})
		_, _ = w.Write(body)
	}
}

func (s *twilioStub) callsTo(to string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[to]
}

// comms.send_sms against the Twilio-protocol server: an invalid number (400, error 21211) ends
// the process after 1 of its 3 attempts; a 503 is retried, and the next attempt sends.
func TestSendSMSInvalidNumberEndsAtOnce(t *testing.T) {
	t.Parallel()
	stub := &twilioStub{calls: map[string]int{}}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	twilio, err := providers.NewTwilio(providers.TwilioConfig{AccountSID: stubAccountSID, AuthToken: stubAuthToken,
		From: "+15550001111", BaseURL: srv.URL})
	require.NoError(t, err)
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeSMS: twilio})

	invalid := scalar[int64](t, pool, `select comms.send_sms($1, 'Your code is 1234')`, invalidNumber)
	valid := scalar[int64](t, pool, `select comms.send_sms('+15551234567', 'Your code is 1234')`)
	waitTrue(t, pool, "the invalid number's SMS failed", `select exists (select 1 from comms.send_sms_task_failed where send_sms_task_id = $1)`, invalid)
	waitTrue(t, pool, "the valid number's SMS sent", `select exists (select 1 from comms.send_sms_task_succeeded where send_sms_task_id = $1)`, valid)
	quiet(t, pool, "send_sms_task_id", invalid)

	require.Equal(t, 1, scalar[int](t, pool, `select comms.count_send_sms_attempts($1)`, invalid), "exactly 1 attempt of 3")
	require.Equal(t, 1, stub.callsTo(invalidNumber))
	require.Equal(t, []string{"permanent"}, failureClasses(t, pool, "comms", "send_sms", invalid))
	require.Equal(t, "permanent: sms not sent: sms provider: twilio: 400 21211: The 'To' number +15005550001 is not a valid phone number. "+
		"(https://www.twilio.com/docs/errors/21211)",
		scalar[string](t, pool, `select error_message from comms.send_sms_task_failed where send_sms_task_id = $1`, invalid))
	require.True(t, scalar[bool](t, pool, `select comms.is_send_sms_stuck($1)`, invalid))

	require.Equal(t, 2, scalar[int](t, pool, `select comms.count_send_sms_attempts($1)`, valid), "the 503 was retried")
	require.Equal(t, []string{"retriable"}, failureClasses(t, pool, "comms", "send_sms", valid))
	require.Equal(t, 2, stub.callsTo("+15551234567"))
}

// files.file_deletion against a real S3 gateway: a missing bucket (404 NoSuchBucket) ends the
// deletion after 1 of its 5 attempts, the file not marked; a files service that answers 503
// once is retried, and the next attempt deletes the object.
func TestFileDeletionPermanentFailureEndsAtOnce(t *testing.T) {
	t.Parallel()
	gw := s3test.Start(t)
	gw.CreateBucket(t, "uploads")
	gw.PutObject(t, "uploads", "rec/1.wav", "RIFF....")
	signer, err := providers.NewS3Signer(providers.S3SignerConfig{Endpoint: gw.Endpoint, Region: s3test.Region,
		AccessKeyID: s3test.AccessKeyID, SecretAccessKey: s3test.SecretAccessKey})
	require.NoError(t, err)
	var mu sync.Mutex
	signs := 0
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req providers.SignRequest
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		mu.Lock()
		signs++
		first := signs == 1
		mu.Unlock()
		if first {
			http.Error(w, `{"error":"signer restarting"}`, http.StatusServiceUnavailable)
			return
		}
		u, headers, err := signer.Presign(r.Context(), req.Bucket, req.ObjectKey)
		if err != nil {
			http.Error(w, `{"error":"sign"}`, http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(providers.SignResponse{URL: u, Headers: headers})
	}))
	t.Cleanup(files.Close)

	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 5)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: signer})
	missing := scalar[int64](t, pool, `insert into files.file (bucket, object_key) values ('no-such-bucket', 'rec/1.wav') returning file_id`)
	id := scalar[int64](t, pool, `select file_deletion_task_id from files.kickoff_file_deletion($1)`, missing)
	waitTrue(t, pool, "failed", `select exists (select 1 from files.file_deletion_task_failed where file_deletion_task_id = $1)`, id)
	quiet(t, pool, "file_deletion_task_id", id)
	require.Equal(t, 1, scalar[int](t, pool, `select files.count_file_deletion_attempts($1)`, id), "exactly 1 attempt of 5")
	require.Equal(t, []string{"permanent"}, failureClasses(t, pool, "files", "file_deletion", id))
	msg := scalar[string](t, pool, `select error_message from files.file_deletion_task_failed where file_deletion_task_id = $1`, id)
	require.True(t, strings.HasPrefix(msg, "permanent: file not deleted: file_delete provider: s3: 404 NoSuchBucket"), msg)
	require.True(t, scalar[bool](t, pool, `select files.is_file_deletion_stuck($1)`, missing))
	require.False(t, scalar[bool](t, pool, `select metadata ? 'deleted' from files.file where file_id = $1`, missing))

	// Through the files service, which answers 503 once: retried, then deleted.
	httpSigner, err := providers.NewHTTPSigner(providers.HTTPSignerConfig{URL: files.URL})
	require.NoError(t, err)
	pool2 := dbtest.NewDB(t)
	fastProcesses(t, pool2, 5)
	startWorker(t, pool2, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: httpSigner})
	file := scalar[int64](t, pool2, `insert into files.file (bucket, object_key) values ('uploads', 'rec/1.wav') returning file_id`)
	id = scalar[int64](t, pool2, `select file_deletion_task_id from files.kickoff_file_deletion($1)`, file)
	waitTrue(t, pool2, "deleted", `select exists (select 1 from files.file_deletion_task_succeeded where file_deletion_task_id = $1)`, id)
	require.Equal(t, 2, scalar[int](t, pool2, `select files.count_file_deletion_attempts($1)`, id))
	require.Equal(t, []string{"retriable"}, failureClasses(t, pool2, "files", "file_deletion", id))
	require.Contains(t, scalar[string](t, pool2, `select f.error_message from files.file_deletion_attempt a
		join files.file_deletion_attempt_failed f using (file_deletion_attempt_id) where a.file_deletion_task_id = $1`, id), "503")
	require.False(t, gw.ObjectExists(t, "uploads", "rec/1.wav"))
}

// The account deletion that waits on its file deletions: the storage has no bucket for the
// account's files (404 NoSuchBucket), so each file deletion ends after 1 of its 5 attempts and
// the account deletion fails, naming the file and the permanent failure, without anonymizing.
// Once the bucket exists, a retry by hand of the account deletion restarts the failed file
// deletions and ends with the account deleted and anonymized.
func TestAccountDeletionPermanentFileFailure(t *testing.T) {
	t.Parallel()
	gw := s3test.Start(t)
	signer, err := providers.NewS3Signer(providers.S3SignerConfig{Endpoint: gw.Endpoint, Region: s3test.Region,
		AccessKeyID: s3test.AccessKeyID, SecretAccessKey: s3test.SecretAccessKey})
	require.NoError(t, err)
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 5)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: signer})
	account, files := newAccount(t, pool, 2) // bucket "recordings", not created yet

	id := scalar[int64](t, pool, `select account_deletion_task_id from api.request_account_deletion($1)`, account)
	waitTrue(t, pool, "the account deletion failed",
		`select exists (select 1 from accounts.account_deletion_task_failed where account_deletion_task_id = $1)`, id)
	// The account deletion fails at the first stuck file; each file deletion ends on its own
	// (the second may still be recording its failure): wait for each to end, failed.
	for _, f := range files {
		waitTrue(t, pool, "the file deletion failed", `select exists (select 1 from files.file_deletion_task d
			join files.file_deletion_task_failed x using (file_deletion_task_id) where d.file_id = $1)`, f)
		d := scalar[int64](t, pool, `select file_deletion_task_id from files.file_deletion_task where file_id = $1`, f)
		require.Equal(t, 1, scalar[int](t, pool, `select files.count_file_deletion_attempts($1)`, d), "file %d: exactly 1 attempt of 5", f)
		require.Equal(t, []string{"permanent"}, failureClasses(t, pool, "files", "file_deletion", d))
	}
	msg := scalar[string](t, pool, `select error_message from accounts.account_deletion_task_failed where account_deletion_task_id = $1`, id)
	require.Regexp(t, `^account \d+: file deletion stuck for file \d+ \(recordings/acct-\d+/rec-\d\.wav\): `, msg)
	require.Contains(t, msg, "permanent: file not deleted: file_delete provider: s3: 404 NoSuchBucket")
	require.False(t, scalar[bool](t, pool, `select exists (select 1 from accounts.account_anonymization_task where account_id = $1)`, account))

	gw.CreateBucket(t, "recordings")
	for _, f := range files {
		gw.PutObject(t, "recordings", objectKey(t, pool, f), "RIFF....")
	}
	require.Equal(t, 2, scalar[int](t, pool, `select run from queues.retry_process('accounts.account_deletion', $1, 'bucket restored')`, id))
	waitTrue(t, pool, "the account deleted",
		`select exists (select 1 from accounts.account_deletion_task_succeeded where account_deletion_task_id = $1)`, id)
	for _, f := range files {
		require.False(t, gw.ObjectExists(t, "recordings", objectKey(t, pool, f)))
	}
	require.True(t, scalar[bool](t, pool, `select accounts.has_account_flag($1, 'anonymized')`, account))
}
