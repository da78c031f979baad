package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// signupWorkerBinary builds internal/cmd/signupworker once per test run (a worker that runs the
// durable workflow example of docs/workflows.md).
var signupWorkerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "taskorch-signup-")
	if err != nil {
		return "", err
	}
	if err := removeWhenDone(dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	bin := filepath.Join(dir, "signupworker")
	if out, err := exec.Command("go", "build", "-o", bin, "./internal/cmd/signupworker").CombinedOutput(); err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

// The durable workflow example of docs/workflows.md (the signup), as the document prints it, run
// by worker processes that are SIGKILLed while steps run, before the sleep and after it: each
// account is created exactly once (StepTx), each e-mail sent at least once and always with the
// same key (Step), and each workflow completes, with its four calls recorded once each, in order.
func TestE2EDurableSignupExample(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	src, err := os.ReadFile("internal/cmd/signupworker/main.go")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(src), "// doc:signup-go begin\n\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "\n\n// doc:signup-go end")
	require.True(t, ok)
	require.Equal(t, docExample(t, "signup-go"), block, "signupworker's workflow is docs/workflows.md's signup block, verbatim")
	bin, err := signupWorkerBinary()
	require.NoError(t, err)

	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	_, err = pool.Exec(ctx, `
		create table accounts (id bigserial primary key, user_id bigint not null, created_at timestamptz not null default now());
		create table mail_log (id bigserial primary key, kind text not null, account bigint not null, key text not null)`)
	require.NoError(t, err)
	c, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	const n = 30
	ids := make([]int64, n)
	for i := range ids {
		res, err := c.Enqueue(ctx, taskorch.RawArgs{Type: "signup", Payload: []byte(fmt.Sprintf(`{"UserID": %d}`, 1000+i))}, nil)
		require.NoError(t, err)
		ids[i] = res.TaskID
	}
	start := func() *proc {
		return startProc(t, exec.Command(bin), url, "SIGNUP_MAIL_DELAY=150ms")
	}

	// Before the sleep: a worker is killed while welcome e-mails are being sent.
	a, _ := start(), start()
	waitFor(t, pool, "a welcome e-mail sent", `select exists (select from mail_log where kind = 'welcome')`)
	a.signal(t, syscall.SIGKILL)
	a.wait(t)
	start()
	waitFor(t, pool, "every workflow asleep", `select count(*) = $1 from queues.workflow_step where kind = 'sleep'`, n)
	waitFor(t, pool, "every workflow pending until its wake time",
		`select count(*) = $1 from queues.task where task_type = 'signup' and status = 'pending' and run_at > now() + interval '23 hours'`, n)

	// A day passes: the test moves the wake times and the due times back a day, as the clock
	// would have (the checkpoints are append-only, so it bypasses their trigger to do so).
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `set local session_replication_role = replica;
			update queues.workflow_step set wake_at = wake_at - interval '1 day' where kind = 'sleep'`)
		return err
	}))
	b := start()
	_, err = pool.Exec(ctx, `update queues.task set run_at = run_at - interval '1 day' where task_type = 'signup' and status = 'pending'`)
	require.NoError(t, err)

	// After it: another worker is killed while tips are being sent.
	waitFor(t, pool, "a tips e-mail sent", `select exists (select from mail_log where kind = 'tips')`)
	b.signal(t, syscall.SIGKILL)
	b.wait(t)
	start()
	waitFor(t, pool, "every workflow completed", `select count(*) = $1 from queues.task where task_type = 'signup' and status = 'completed'`, n)

	require.Equal(t, n, q[int](t, pool, `select count(*)::int from accounts`), "each account created exactly once")
	require.Equal(t, n, q[int](t, pool, `select count(distinct user_id)::int from accounts`))
	for _, kind := range []string{"welcome", "tips"} {
		require.Equal(t, n, q[int](t, pool, `select count(distinct account)::int from mail_log where kind = $1`, kind), "every %s e-mail sent", kind)
		require.Zero(t, q[int](t, pool, `select count(*)::int from (select account from mail_log where kind = $1
			group by account having count(distinct key) > 1) x`, kind), "a %s e-mail sent again has the same key", kind)
	}
	for _, id := range ids {
		require.Equal(t, []string{"step_tx:create-account", "step:send-welcome", "sleep:a-day-later", "step:send-tips"},
			q[[]string](t, pool, `select array_agg(kind || ':' || name order by seq) from queues.workflow_step where task_id = $1`, id), "task %d", id)
		account := q[int64](t, pool, `select (result::text)::bigint from queues.workflow_step where task_id = $1 and seq = 1`, id)
		require.Equal(t, []string{fmt.Sprintf("taskorch:%d:2", id), fmt.Sprintf("taskorch:%d:4", id)},
			q[[]string](t, pool, `select array_agg(distinct key order by key) from mail_log where account = $1`, account), "task %d's step keys", id)
	}
}
