package taskorch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A burst of debounced enqueues of one key is one task, with the last payload, run a delay after
// the last enqueue; once it has started, the next enqueue adds a new task.
func TestDebouncedEnqueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	opts := &taskorch.EnqueueOpts{DebounceKey: "account-7", Debounce: time.Hour}
	var first int64
	for i := range 5 {
		res, err := c.Enqueue(ctx, raw("reindex", fmt.Sprintf(`{"n": %d}`, i)), opts)
		require.NoError(t, err)
		if i == 0 {
			first = res.TaskID
			require.False(t, res.Debounced)
		} else {
			require.Equal(t, first, res.TaskID)
			require.True(t, res.Debounced)
		}
	}
	other, err := c.Enqueue(ctx, raw("reindex", `{"n": 99}`), &taskorch.EnqueueOpts{DebounceKey: "account-8", Debounce: time.Hour})
	require.NoError(t, err)
	require.NotEqual(t, first, other.TaskID, "another key is another task")
	require.Equal(t, int64(2), scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'reindex'`))
	require.Equal(t, `{"n": 4}`, scalar[string](t, pool, `select payload::text from queues.task where task_id = $1`, first))
	require.True(t, scalar[bool](t, pool, `select run_at > now() + interval '59 minutes' from queues.task where task_id = $1`, first))
	require.Equal(t, int64(4), scalar[int64](t, pool, `select count(*) from queues.task_event where task_id = $1 and event = 'debounced'`, first))

	// Once it runs, a new enqueue of the key adds a task.
	mustExec(t, pool, `update queues.task set run_at = now() where task_id = $1`, first)
	require.Len(t, claim(t, pool, "w", 1, "5 minutes"), 1)
	next, err := c.Enqueue(ctx, raw("reindex", `{"n": 5}`), opts)
	require.NoError(t, err)
	require.False(t, next.Debounced)
	require.NotEqual(t, first, next.TaskID)
}

// Enqueuers racing on one key leave exactly one pending task; a worker runs a burst once, with
// the last payload.
func TestDebounceConcurrentAndRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				_, err := c.Enqueue(ctx, raw("race", fmt.Sprintf(`{"i": %d, "j": %d}`, i, j)),
					&taskorch.EnqueueOpts{DebounceKey: "k", Debounce: time.Hour})
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'race'`))

	var runs atomic.Int32
	var last atomic.Value
	hs := taskorch.NewHandlers()
	hs.HandleFunc("burst", func(_ context.Context, task *taskorch.Task) error {
		runs.Add(1)
		last.Store(string(task.Payload))
		return nil
	})
	startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, PollInterval: 10 * time.Millisecond})
	var id int64
	for i := range 10 {
		res, err := c.Enqueue(ctx, raw("burst", fmt.Sprintf(`{"i": %d}`, i)), &taskorch.EnqueueOpts{DebounceKey: "b", Debounce: 2 * time.Second})
		require.NoError(t, err)
		id = res.TaskID
	}
	waitStatus(t, pool, id, taskorch.StatusCompleted)
	require.Equal(t, int32(1), runs.Load())
	require.JSONEq(t, `{"i": 9}`, last.Load().(string))
}

// Bad debounce input is refused clearly, and nothing is written.
func TestDebounceInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	for _, o := range []taskorch.EnqueueOpts{
		{Debounce: time.Second},
		{DebounceKey: "k", Debounce: -time.Second},
		{DebounceKey: strings.Repeat("k", 513), Debounce: time.Second},
		{DebounceKey: "k", Debounce: time.Second, IdempotencyKey: "i"},
		{DebounceKey: "k", Debounce: time.Second, ScheduledAt: time.Now()},
	} {
		_, err := c.Enqueue(ctx, raw("bad", `{}`), &o)
		require.ErrorIs(t, err, taskorch.ErrInvalidInput, "%+v", o)
	}
	_, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{{Args: raw("bad", `{}`), Opts: &taskorch.EnqueueOpts{DebounceKey: "k"}}})
	require.ErrorContains(t, err, "EnqueueMany does not debounce")
	for _, q := range []string{
		`select queues.enqueue_debounced('bad', '{}', '', interval '1 second')`,
		`select queues.enqueue_debounced('bad', '{}', null, interval '1 second')`,
		`select queues.enqueue_debounced('bad', '{}', 'k', interval '-1 second')`,
		`select queues.enqueue_debounced('bad', '{}', 'k', interval '2 years')`,
		`select queues.enqueue_debounced('bad', '[]', 'k', interval '1 second')`,
		`select queues.enqueue_debounced('bad type', '{}', 'k', interval '1 second')`,
	} {
		_, err := pool.Exec(ctx, q)
		require.ErrorIs(t, taskorch.MapPgError(err), taskorch.ErrInvalidInput, q)
	}
	require.Equal(t, int64(0), scalar[int64](t, pool, `select count(*) from queues.task`))
}

// A started debounced task that becomes pending again — a retry, an expired lease rescued by a
// claim — while a newer task holds its key: nothing conflicts, and claims go on. (Before the
// claim gave up the key, the rescue's update broke the pending-only unique index, and every claim
// failed from then on.)
func TestDebouncedTaskPendingAgainWhileKeyTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	opts := &taskorch.EnqueueOpts{DebounceKey: "tick", Debounce: 0}
	first, err := c.Enqueue(ctx, raw("tick", `{"n": 1}`), opts)
	require.NoError(t, err)
	got := claim(t, pool, "w1", 1, "10 milliseconds")
	require.Len(t, got, 1)
	require.Equal(t, first.TaskID, got[0].TaskID)
	require.Nil(t, scalar[*string](t, pool, `select debounce_key from queues.task where task_id = $1`, first.TaskID),
		"a claimed task gives up its key")

	second, err := c.Enqueue(ctx, raw("tick", `{"n": 2}`), opts)
	require.NoError(t, err)
	require.NotEqual(t, first.TaskID, second.TaskID, "the running task takes no debounced enqueue")

	// The first task's lease expires; the next claim rescues it to pending and claims both.
	require.Eventually(t, func() bool {
		return scalar[bool](t, pool, `select lease_expires_at < now() from queues.task where task_id = $1`, first.TaskID)
	}, 5*time.Second, 5*time.Millisecond)
	got = claim(t, pool, "w2", 10, "1 minute")
	ids := []int64{}
	for _, g := range got {
		ids = append(ids, g.TaskID)
	}
	require.ElementsMatch(t, []int64{first.TaskID, second.TaskID}, ids)

	// A retry back to pending while a third holds the key: no conflict either.
	third, err := c.Enqueue(ctx, raw("tick", `{"n": 3}`), opts)
	require.NoError(t, err)
	lease := scalar[int64](t, pool, `select lease_id from queues.task where task_id = $1`, second.TaskID)
	require.Equal(t, "pending", scalar[string](t, pool, `select queues.fail_task($1, 'boom', $2, true)::text`, second.TaskID, lease))
	require.Equal(t, int64(2), scalar[int64](t, pool, `select count(*) from queues.task where task_type = 'tick' and status = 'pending'`))
	require.Equal(t, "tick", scalar[string](t, pool, `select debounce_key from queues.task where task_id = $1`, third.TaskID))
}
