package sqs_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/sqstest"
	"github.com/taskorch/taskorch/transport"
	"github.com/taskorch/taskorch/transport/sqs"
)

var creds = credentials.NewStaticCredentialsProvider("test", "test", "")

// newTransport gives a test a local SQS server, a queue created through the SDK, and a
// transport on it.
func newTransport(t *testing.T, hold time.Duration) (*sqs.Transport, *sqstest.Server, string) {
	t.Helper()
	srv := sqstest.Start(t)
	client := awssqs.New(awssqs.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(srv.URL)})
	out, err := client.CreateQueue(t.Context(), &awssqs.CreateQueueInput{QueueName: aws.String("tasks"),
		Attributes: map[string]string{"VisibilityTimeout": "30"}})
	require.NoError(t, err)
	tr, err := sqs.New(t.Context(), sqs.Config{QueueURL: aws.ToString(out.QueueUrl), Endpoint: srv.URL,
		Region: "us-east-1", Credentials: creds, Wait: time.Second})
	require.NoError(t, err)
	require.NoError(t, tr.Open(t.Context(), transport.OpenOptions{Consumer: "w1", Hold: hold}))
	return tr, srv, aws.ToString(out.QueueUrl)
}

func receiveAll(t *testing.T, tr transport.Transport, want int) []transport.Message {
	t.Helper()
	var got []transport.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		msgs, err := tr.Receive(t.Context(), want-len(got))
		require.NoError(t, err)
		got = append(got, msgs...)
	}
	return got
}

func ids(msgs []transport.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.TaskID
	}
	slices.Sort(out)
	return out
}

// The real SDK sends, receives in batches of ten, and deletes through the JSON protocol.
func TestSendReceiveAck(t *testing.T) {
	t.Parallel()
	tr, srv, _ := newTransport(t, time.Minute)
	require.NoError(t, tr.Ping(t.Context()))
	var want []int64
	for i := range 25 {
		want = append(want, int64(i+1))
	}
	require.NoError(t, tr.Send(t.Context(), want))
	got := receiveAll(t, tr, 25)
	require.Equal(t, want, ids(got))
	require.NoError(t, tr.Ack(t.Context(), got))
	require.Equal(t, 0, srv.Depth("tasks"))
	c := srv.Counts()
	require.Equal(t, int64(25), c.Sent)
	require.Equal(t, int64(25), c.Deleted)

	// Empty: a long poll returns nothing, no error.
	msgs, err := tr.Receive(t.Context(), 10)
	require.NoError(t, err)
	require.Empty(t, msgs)
}

// A message neither deleted nor extended is delivered again after its visibility timeout;
// Extend keeps it hidden.
func TestVisibility(t *testing.T) {
	t.Parallel()
	tr, srv, _ := newTransport(t, time.Second)
	require.NoError(t, tr.Send(t.Context(), []int64{7, 8}))
	got := receiveAll(t, tr, 2)
	require.Len(t, got, 2)

	// Keep 7 hidden, let 8 lapse.
	var seven []transport.Message
	for _, m := range got {
		if m.TaskID == 7 {
			seven = append(seven, m)
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
				_ = tr.Extend(context.WithoutCancel(t.Context()), seven)
			}
		}
	}()
	again := receiveAll(t, tr, 1)
	require.Equal(t, []int64{8}, ids(again))
	require.Equal(t, int64(1), srv.Counts().Redelivered)

	// An older receipt handle of 8 deletes nothing; the latest one does.
	require.NoError(t, tr.Ack(t.Context(), []transport.Message{got[slices.IndexFunc(got, func(m transport.Message) bool { return m.TaskID == 8 })]}))
	require.Equal(t, 2, srv.Depth("tasks"))
	require.NoError(t, tr.Ack(t.Context(), again))
	close(stop)
	<-done
	require.NoError(t, tr.Ack(t.Context(), seven))
	require.Equal(t, 0, srv.Depth("tasks"))
}

// The server's faults: duplicates are delivered twice, dropped ones never, delayed ones late.
func TestFaults(t *testing.T) {
	t.Parallel()
	tr, srv, _ := newTransport(t, time.Minute)
	srv.SetFaults(sqstest.Faults{Duplicate: 0.2, Drop: 0.1, Delay: 0.1, DelayBy: 300 * time.Millisecond, Seed: 7})
	var sent []int64
	for i := range 200 {
		sent = append(sent, int64(i+1))
	}
	require.NoError(t, tr.Send(t.Context(), sent))
	c := srv.Counts()
	require.Positive(t, c.Duplicated)
	require.Positive(t, c.Dropped)
	require.Positive(t, c.Delayed)
	want := 200 + int(c.Duplicated) - int(c.Dropped)
	got := receiveAll(t, tr, want)
	require.Len(t, got, want)
	msgs, err := tr.Receive(t.Context(), 10)
	require.NoError(t, err)
	require.Empty(t, msgs, "nothing beyond the duplicates")
}

// Errors come back as the SDK's typed errors: the server speaks the protocol's error shape.
func TestErrors(t *testing.T) {
	t.Parallel()
	srv := sqstest.Start(t)
	tr, err := sqs.New(t.Context(), sqs.Config{QueueURL: srv.URL + "/000000000000/missing", Endpoint: srv.URL,
		Region: "us-east-1", Credentials: creds})
	require.NoError(t, err)
	err = tr.Ping(t.Context())
	var missing *types.QueueDoesNotExist
	require.True(t, errors.As(err, &missing), "got %v", err)
	_, err = tr.Receive(t.Context(), 1)
	require.True(t, errors.As(err, &missing), "got %v", err)

	err = tr.Send(t.Context(), []int64{1, 2})
	require.Equal(t, []int64{1, 2}, transport.Failed(err, nil))

	_, err = sqs.New(t.Context(), sqs.Config{QueueURL: "not a url"})
	require.Error(t, err)
}

// New checks the queue URL without calling SQS (its errors redact a password); Open needs a
// hold, once.
func TestConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"", "needs a queue URL"},
		{"queue", "SQS queue URL"},
		{"not a url", "SQS queue URL"},
		{"https://u:s3cret@sqs.us-east-1.amazonaws.com/", "no queue name"},
		{"ftp://u:s3cret@host/1/q", "SQS queue URL"},
	} {
		tr, err := sqs.New(t.Context(), sqs.Config{QueueURL: tc.url, Region: "us-east-1", Credentials: creds})
		require.ErrorContains(t, err, tc.want, tc.url)
		require.NotContains(t, err.Error(), "s3cret")
		require.Nil(t, tr)
	}
	tr, err := sqs.New(t.Context(), sqs.Config{QueueURL: "http://127.0.0.1:1/000000000000/q", Region: "us-east-1", Credentials: creds})
	require.NoError(t, err)
	require.Equal(t, sqs.Name, tr.Name())
	require.ErrorContains(t, tr.Open(t.Context(), transport.OpenOptions{Consumer: "w1"}), "hold")
	require.NoError(t, tr.Open(t.Context(), transport.OpenOptions{Consumer: "w1", Hold: time.Second}))
	require.ErrorContains(t, tr.Open(t.Context(), transport.OpenOptions{Consumer: "w2", Hold: time.Second}), "already open")
}
