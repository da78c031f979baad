package transportsuite_test

// The one file of TestTransportAckAfterOutcome that knows the transport packages and how a test
// hands a transport to a worker (useCheckedTransport).

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/redistest"
	"github.com/taskorch/taskorch/internal/testing/sqstest"
	"github.com/taskorch/taskorch/transport"
	"github.com/taskorch/taskorch/transport/redisstream"
	"github.com/taskorch/taskorch/transport/sqs"
)

// useCheckedTransport makes the worker configured by cfg (cfg.ID set) deliver through the real
// transport name (transportRedis: a redis-server of the test's own; TransportSQS: the
// local SQS server, through the AWS SDK), wrapped by check. With TransportPostgres it does
// nothing. The servers stop when the test ends, after the worker (start the worker after
// calling this).
func useCheckedTransport(t *testing.T, cfg *taskorch.WorkerConfig, name string, check *ackChecker) {
	t.Helper()
	// The worker opens the transport with its id and the hold its lease needs.
	var tr transport.Transport
	switch name {
	case transportPostgres:
		return
	case transportRedis:
		srv := redistest.Start(t)
		r, err := redisstream.New(redisstream.Config{URL: srv.URL(0), Block: 200 * time.Millisecond})
		require.NoError(t, err)
		tr = r
	case transportSQS:
		srv := sqstest.Start(t)
		queueURL := srv.CreateQueue("tasks", 30*time.Second)
		s, err := sqs.New(t.Context(), sqs.Config{QueueURL: queueURL, Endpoint: srv.URL, Region: "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), Wait: time.Second})
		require.NoError(t, err)
		tr = s
	default:
		t.Fatalf("unknown transport %q", name)
	}
	check.Transport = tr
	cfg.Transport = check
}

// ackChecker wraps a worker's transport and checks each acknowledgement against the database,
// on connections of its own, before passing it on: a message may be acknowledged only once the
// outcome of the claim it led to is committed (the task is no longer running under the lease
// that claim made), or when it led to no claim (refused). docs/transports.md: "A message is
// acknowledged only once the outcome it led to is committed (or its claim was refused)".
//
// Which claim a message led to: at Receive it notes the lease sequence's last value; the claim
// the worker makes with the message comes after, so its lease is this worker's first lease of
// the task above that mark. (A refused duplicate could be matched with a later claim of the same
// task by this worker; the test that uses it claims each task once.)
type ackChecker struct {
	transport.Transport
	db       *pgxpool.Pool
	workerID string
	describe func(taskID int64) string

	mu         sync.Mutex
	mark       map[string]int64 // message handle -> the lease sequence's last value when received
	received   int
	acked      map[int64]int // task id -> messages acknowledged
	violations []string
	errs       []error
}

// newAckChecker makes a checker for the worker workerID over pool's database; describe names a
// task in violation reports. It has its own connections.
func newAckChecker(t *testing.T, pool *pgxpool.Pool, workerID string, describe func(taskID int64) string) *ackChecker {
	t.Helper()
	cfg := pool.Config().Copy()
	cfg.MaxConns = 4
	db, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return &ackChecker{db: db, workerID: workerID, describe: describe, mark: map[string]int64{}, acked: map[int64]int{}}
}

func (a *ackChecker) Receive(ctx context.Context, n int) ([]transport.Message, error) {
	msgs, err := a.Transport.Receive(ctx, n)
	if len(msgs) == 0 {
		return msgs, err
	}
	var mark int64
	qerr := a.db.QueryRow(context.WithoutCancel(ctx),
		`select coalesce(pg_sequence_last_value(pg_get_serial_sequence('queues.task_lease', 'task_lease_id')::regclass), 0)`).Scan(&mark)
	a.mu.Lock()
	defer a.mu.Unlock()
	if qerr != nil {
		a.errs = append(a.errs, fmt.Errorf("receive: reading the lease sequence: %w", qerr))
	}
	a.received += len(msgs)
	for _, m := range msgs {
		a.mark[m.Handle] = mark
	}
	return msgs, err
}

func (a *ackChecker) Ack(ctx context.Context, msgs []transport.Message) error {
	a.check(context.WithoutCancel(ctx), msgs)
	return a.Transport.Ack(ctx, msgs)
}

// check records a violation for each message whose task is still running under the lease the
// message's claim made.
func (a *ackChecker) check(ctx context.Context, msgs []transport.Message) {
	ids := make([]int64, len(msgs))
	marks := make([]int64, len(msgs))
	a.mu.Lock()
	for i, m := range msgs {
		ids[i] = m.TaskID
		mark, ok := a.mark[m.Handle]
		if !ok {
			a.errs = append(a.errs, fmt.Errorf("ack of message %q (task %d), never received", m.Handle, m.TaskID))
		}
		marks[i] = mark
	}
	a.mu.Unlock()
	rows, err := a.db.Query(ctx, `
		select m.task_id, t.status::text, t.lease_id,
		       (select min(l.task_lease_id) from queues.task_lease l
		         where l.task_id = m.task_id and l.worker_id = $3 and l.task_lease_id > m.mark)
		from unnest($1::bigint[], $2::bigint[]) with ordinality as m(task_id, mark, i)
		left join queues.task t on t.task_id = m.task_id
		order by m.i`, ids, marks, a.workerID)
	type row struct {
		taskID         int64
		status         *string
		lease, claimed *int64
	}
	var got []row
	if err == nil {
		for rows.Next() {
			var r row
			if err = rows.Scan(&r.taskID, &r.status, &r.lease, &r.claimed); err != nil {
				break
			}
			got = append(got, r)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errs = append(a.errs, fmt.Errorf("ack: checking %d messages: %w", len(msgs), err))
		return
	}
	for _, r := range got {
		a.acked[r.taskID]++
		if r.claimed != nil && r.status != nil && *r.status == "running" && r.lease != nil && *r.lease == *r.claimed {
			a.violations = append(a.violations, fmt.Sprintf("%s: task %d (%s) acknowledged while still running under lease %d, the one its message claimed: its outcome was not committed",
				a.Name(), r.taskID, a.describe(r.taskID), *r.lease))
		}
	}
}

// ackedAll reports whether a message of every task in ids has been acknowledged.
func (a *ackChecker) ackedAll(ids []int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		if a.acked[id] == 0 {
			return false
		}
	}
	return true
}

// report returns the violations, the checker's own errors, and how many messages it saw.
func (a *ackChecker) report() (violations []string, errs []error, received, acked int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.acked {
		acked += n
	}
	return append([]string(nil), a.violations...), append([]error(nil), a.errs...), a.received, acked
}
