package admin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// By id, each task gets its own outcome: acted on, or why not; one refusal does not stop the
// others, and the refusals say why in words.
func TestActOnTaskIDsOutcomes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	dead := seedTask(t, pool, "job", "dead", time.Minute)
	running := seedTask(t, pool, "job", "running", time.Minute)
	completed := seedTask(t, pool, "job", "completed", time.Minute)
	cancelled := seedTask(t, pool, "job", "cancelled", time.Minute)
	pending := seedTask(t, pool, "job", "pending", 0)
	const missing = 999_999

	outs, err := ActOnTaskIDs(ctx, pool, ActionRetry, []int64{missing, dead, running, completed, dead}, "ann", "")
	require.NoError(t, err)
	got := map[int64]string{}
	for _, o := range outs {
		got[o.TaskID] = o.Outcome
	}
	require.Equal(t, map[int64]string{dead: OutcomeDone, running: OutcomeWrongState, completed: OutcomeWrongState, missing: OutcomeNotFound}, got)
	require.Len(t, outs, 4, "one outcome per distinct id")
	require.Equal(t, "task 999999 does not exist", Refusal(ActionRetry, outs[len(outs)-1]))
	for _, o := range outs {
		switch o.TaskID {
		case running:
			require.Contains(t, Refusal(ActionRetry, o), "is running; cancel it or wait for it to finish before retrying")
		case completed:
			require.Contains(t, Refusal(ActionRetry, o), "already completed; enqueue a new task to run it again")
		case dead:
			require.Empty(t, Refusal(ActionRetry, o))
			require.Equal(t, "pending", *o.Status)
		}
	}

	outs, err = ActOnTaskIDs(ctx, pool, ActionCancel, []int64{pending, cancelled, completed}, "bob", "wrong customer")
	require.NoError(t, err)
	require.Equal(t, []string{OutcomeWrongState, OutcomeUnchanged, OutcomeDone},
		[]string{outs[0].Outcome, outs[1].Outcome, outs[2].Outcome}, "ids in order: completed, cancelled, pending")
	require.Equal(t, int64(1), count(t, pool, `select count(*) from queues.task_event where task_id = $1 and event = 'cancelled'
		and actor = 'bob' and detail = 'wrong customer'`, pending))
	require.Zero(t, count(t, pool, `select count(*) from queues.task_event where task_id = $1`, cancelled), "unchanged: no event")

	outs, err = ActOnTaskIDs(ctx, pool, ActionDelete, []int64{running, completed}, "", "")
	require.NoError(t, err)
	require.Equal(t, OutcomeWrongState, outs[0].Outcome, "never a running task")
	require.Contains(t, Refusal(ActionDelete, outs[0]), "is running; only finished tasks are deleted (cancel it first)")
	require.Equal(t, OutcomeDone, outs[1].Outcome)
	require.Nil(t, outs[1].Status, "gone")
	var actor string
	require.NoError(t, pool.QueryRow(ctx, `select actor from queues.task_event where task_id = $1 and event = 'deleted'`, completed).Scan(&actor))
	require.Equal(t, "postgres", actor, "no actor given: the database role")

	// A dead debounced task whose key a pending task holds is not retried (the pending one is
	// the debounced task), and says so.
	var a, b int64
	require.NoError(t, pool.QueryRow(ctx, `select task_id from queues.enqueue_debounced('deb', '{}', 'k', interval '1 hour')`).Scan(&a))
	_, err = pool.Exec(ctx, `update queues.task set status = 'dead', dead_at = now() where task_id = $1`, a)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `select task_id from queues.enqueue_debounced('deb', '{}', 'k', interval '1 hour')`).Scan(&b))
	require.NotEqual(t, a, b)
	outs, err = ActOnTaskIDs(ctx, pool, ActionRetry, []int64{a}, "", "")
	require.NoError(t, err)
	require.Equal(t, OutcomeConflict, outs[0].Outcome)
	require.Equal(t, "dead", taskStatus(t, pool, a))
}

// Deleting a finished task removes its row and its errors, keeps its leases and events (with a
// deleted event naming who), and frees its idempotency key.
func TestDeleteKeepsHistoryAndFreesKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('report', '{}', _idempotency_key => 'r-1')`).Scan(&id))
	for _, sql := range []string{
		`insert into queues.task_lease (task_id, worker_id, attempt, leased_at, expires_at) values ($1, 'w', 1, now(), now() + interval '1 minute')`,
		`update queues.task set status = 'dead', attempt = 1, dead_at = now() where task_id = $1`,
		`insert into queues.task_event (task_id, event, from_status, to_status, worker_id, attempt) values ($1, 'dead', 'running', 'dead', 'w', 1)`,
		`insert into queues.error (task_id, error_message, context) values ($1, 'boom', '{}')`,
	} {
		_, err := pool.Exec(ctx, sql, id)
		require.NoError(t, err, sql)
	}

	outs, err := ActOnTaskIDs(ctx, pool, ActionDelete, []int64{id}, "ann", "")
	require.NoError(t, err)
	require.Equal(t, OutcomeDone, outs[0].Outcome)
	require.Zero(t, count(t, pool, `select count(*) from queues.task where task_id = $1`, id))
	require.Zero(t, count(t, pool, `select count(*) from queues.error where task_id = $1`, id), "its errors go with it")
	require.Equal(t, int64(1), count(t, pool, `select count(*) from queues.task_lease where task_id = $1`, id), "its leases stay")
	require.Equal(t, int64(2), count(t, pool, `select count(*) from queues.task_event where task_id = $1`, id), "dead, then deleted")
	require.Equal(t, int64(1), count(t, pool, `select count(*) from queues.task_history where task_id = $1 and event = 'deleted'`, id),
		"the deletion shows in the history view")

	var again int64
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('report', '{}', _idempotency_key => 'r-1')`).Scan(&again))
	require.NotEqual(t, id, again, "the key is free again")
}
