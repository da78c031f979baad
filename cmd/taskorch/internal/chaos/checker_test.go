package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/cmd/taskorch/internal/chaosflow"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/providers"
)

func TestParseChecks(t *testing.T) {
	t.Parallel()
	checks, err := parseChecks(checksSQL)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(checks), 20)
	seen := map[string]bool{}
	for _, c := range checks {
		require.False(t, seen[c.name], "duplicate check %s", c.name)
		seen[c.name] = true
	}
	_, err = parseChecks("-- check: x nonsense\n-- what\nselect 1;\n")
	require.ErrorContains(t, err, "unknown kind")
	_, err = parseChecks("-- check: x lost\nselect 1;\n")
	require.ErrorContains(t, err, "needs a description")
}

// drainedWorkload runs a small workload of every kind with a real in-process worker (no
// faults) until every task is terminal, stops the worker, and returns the database and what
// was enqueued.
func drainedWorkload(t *testing.T) (*pgxpool.Pool, Expected) {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(ctx, fixtureSQL)
	require.NoError(t, err)

	hs := taskorch.NewHandlers()
	builtinhandlers.Register(hs)
	chaosflow.Register(hs, pool)
	outbox, err := providers.NewOutbox(pool, taskorch.TypeEmail)
	require.NoError(t, err)
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
		Concurrency: 8, Handlers: hs, Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: outbox},
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	stop := func() { cancel(); <-done }
	defer stop()

	p := &producer{pool: pool, log: slog.New(slog.DiscardHandler), items: variedWorkload(t, 120)}
	require.NoError(t, p.run(ctx, time.Millisecond))
	exp, _ := p.committed()
	require.Equal(t, 120, exp.Total())
	require.Positive(t, exp.GoTasks)
	require.Positive(t, exp.DBFunctionTasks)
	require.Positive(t, exp.EmailProcesses)
	require.Positive(t, exp.Workflows)
	require.Positive(t, exp.DurableWorkflows)
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var open int
		require.NoError(t, pool.QueryRow(ctx, `select count(*) from queues.task where status in ('pending', 'running')`).Scan(&open))
		if open == 0 {
			break
		}
		require.False(t, time.Now().After(deadline), "the workload drains; still open: %v", openTasks(ctx, t, pool))
	}
	return pool, exp
}

// openTasks describes the tasks still pending or running, and their last errors.
func openTasks(ctx context.Context, t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `select format('%s %s %s due %s, last error %s, last durable call %s', t.task_id, t.task_type, t.status, t.run_at,
	           (select e.error_message from queues.error e where e.task_id = t.task_id order by e.error_id desc limit 1),
	           (select w.kind || ' ' || w.name from queues.workflow_step w where w.task_id = t.task_id order by w.seq desc limit 1))
	    from queues.task t where t.status in ('pending', 'running') order by t.task_id limit 10`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// variedWorkload returns a workload of n items with every variant: sleeping Go tasks,
// db_function tasks with children, emails to fail-once and always-failing recipients, and
// workflows of both shapes, and at least 7 durable Go workflows.
func variedWorkload(t *testing.T, n int) []item {
	t.Helper()
	for seed := uint64(1); seed < 1000; seed++ {
		items := makeWorkload(n, rand.New(rand.NewPCG(seed, 1)))
		var sleep, child, once, always, diamond, chain bool
		durable := 0
		for _, it := range items {
			sleep = sleep || it.typ == "taskorch.sleep"
			child = child || strings.Contains(string(it.payload), `"child":true`)
			once = once || strings.HasPrefix(it.to, "once-")
			always = always || it.expect == "gave_up"
			diamond = diamond || it.typ == "diamond"
			chain = chain || it.typ == "chain"
			if it.kind == itemDurable {
				durable++
			}
		}
		if sleep && child && once && always && diamond && chain && durable >= 7 { // TestCheck plants a violation in each of 7
			return items
		}
	}
	t.Fatal("no seed below 1000 gives every variant")
	return nil
}

// A clean run passes; the checker then finds each violation planted in the database.
func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, exp := drainedWorkload(t)

	res, err := Check(ctx, pool, exp)
	require.NoError(t, err)
	require.True(t, res.OK(), "%+v", res.Checks)
	require.Equal(t, exp, res.Found)
	require.Positive(t, res.EmailsSent)
	require.Positive(t, res.EmailsGaveUp, "the always-failing recipient's processes give up")
	require.Equal(t, res.Tasks, res.ByStatus["completed"])

	exec := func(sql string) {
		t.Helper()
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	// A second completion under another lease, of a db_function task.
	exec(`insert into chaos.completion (task_id, lease_id, completed_at)
	      select task_id, lease_id + 1000000, now()
	      from queues.task where task_type = 'db_function' and idempotency_key like 'chaos-d%' order by task_id limit 1`)
	// A db_function effect applied twice.
	exec(`insert into chaos.effect (key) select key from chaos.effect order by effect_id limit 1`)
	// A task left pending; a failed task with no error recorded.
	exec(`select queues.enqueue('taskorch.noop', '{}')`)
	exec(`select queues.enqueue('taskorch.noop', '{"unexplained": true}')`)
	exec(`update queues.task set status = 'failed', failed_at = now() where payload ? 'unexplained'`)
	// An email process whose terminal fact is gone.
	exec(`delete from comms.send_email_task_succeeded
	      where send_email_task_id = (select min(send_email_task_id) from comms.send_email_task_succeeded)`)

	// A chain's first node whose effect is recorded again, after its child's (deleted first,
	// so that it is not also an effect twice); a workflow node left waiting and its workflow
	// short of a node.
	exec(`delete from chaos.effect where key = (select min(payload ->> 'key') from queues.task where idempotency_key like 'chaos-wc%.a')`)
	exec(`insert into chaos.effect (key) select min(payload ->> 'key') from queues.task where idempotency_key like 'chaos-wc%.a'`)
	exec(`select queues.enqueue('db_function', '{"db_function": "chaos.apply_effect", "key": "wd999999.a"}', _idempotency_key => 'chaos-wd999999.a',
	      _after => array[(select queues.enqueue('taskorch.noop', '{}'))])`)

	// Durable workflows, each violation on a workflow of its own (the n-th key): a StepTx effect
	// committed twice, and one committed without its checkpoint; a Step that ran under another
	// key; a workflow without its first StepTx's effect, one without its second Step, one whose
	// signal's payload is not its own; a child spawned twice (left pending); a workflow left
	// pending.
	nth := func(n int) string {
		return fmt.Sprintf(`(select key from chaos.durable_effect group by key order by key limit 1 offset %d)`, n)
	}
	exec(`insert into chaos.durable_effect (key, step, payload) select key, step, payload from chaos.durable_effect where key = ` + nth(0) + ` and step = 'effect-1'`)
	exec(`insert into chaos.durable_effect (key, step) select ` + nth(1) + `, 'effect-3'`)
	exec(`insert into chaos.durable_step (key, step, step_key) select key, step, step_key || 'x' from chaos.durable_step where key = ` + nth(2) + ` and step = 'step-1' limit 1`)
	exec(`delete from chaos.durable_effect where key = ` + nth(3) + ` and step = 'effect-1'`)
	exec(`delete from chaos.durable_step where key = ` + nth(4) + ` and step = 'step-2'`)
	exec(`update chaos.durable_effect set payload = '{"key": "someone else"}' where key = ` + nth(5) + ` and step = 'effect-2'`)
	exec(`select queues.enqueue('taskorch.sleep', jsonb_build_object('spawned_by', ` + nth(6) + `, 'ms', 1))`)
	exec(`select queues.enqueue('chaos.durable', '{"key": "f999999"}', _idempotency_key => 'chaos-f999999')`)

	missing := exp
	missing.GoTasks++ // the producer says it committed one more than there is
	res, err = Check(ctx, pool, missing)
	require.NoError(t, err)
	require.False(t, res.OK())
	for name, want := range map[string]int64{
		"completed_twice": 1, "completed_under_stale_lease": 1, "effect_twice": 1,
		"not_terminal": 5, "unexplained_failure": 1, "email_not_terminal": 1,
		"workflow_node_not_completed": 1, "workflow_incomplete": 1, "workflow_child_before_parent": 1,
		"durable_step_tx_twice": 1, "durable_step_tx_without_checkpoint": 1, "durable_step_key_changed": 1,
		"durable_step_tx_missing": 1, "durable_step_missing": 1, "durable_signal_not_received": 1,
		"durable_child_twice": 1, "durable_workflow_not_completed": 1, "durable_child_missing": 0,
	} {
		require.Equal(t, want, res.count(name), name)
	}
	require.Equal(t, int64(5+1+1+1+1+4), res.Lost(),
		"pending tasks and a waiting one, email process, missing workload item, workflow node not completed, workflow incomplete, "+
			"durable workflow not completed, StepTx effect missing, Step missing, signal not received")
	require.Equal(t, int64(4+4), res.Duplicates(), "two completions, one of them stale; one effect twice; a child before its parent; "+
		"a StepTx effect twice, one without its checkpoint, a Step under another key, a child spawned twice")
	require.Equal(t, int64(1), res.Unexplained())

	rep := &Report{Tasks: 120, Result: res, Faults: map[string]int{FaultKill: 1}, Required: []string{FaultKill, FaultPause},
		Phases: []PhaseReport{{Name: "postgres"}, {Name: "netns"}}}
	require.False(t, rep.Passed())
	require.Equal(t, []string{FaultPause}, rep.Missing())
	require.Equal(t, []string{"netns"}, rep.Idle(), "no worker named ns* claimed anything")
}
