package taskorch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

const handlerBatchSQL = `
create schema hb;
create table hb.fact (attempt integer primary key, tx bigint not null);
create function hb.on_success(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if (_p #>> '{original_payload,explode}')::boolean then
        raise exception 'explode %', _p #>> '{original_payload,attempt}';
    end if;
    insert into hb.fact (attempt, tx) values ((_p #>> '{original_payload,attempt}')::integer, txid_current());
    if (_p #>> '{original_payload,refuse}')::boolean then
        return jsonb_build_object('success', false, 'validation_failure_message', 'refused on purpose');
    end if;
    return jsonb_build_object('success', true);
end $$;
grant usage on schema hb to worker_service_user;
grant execute on function hb.on_success(jsonb) to worker_service_user;
`

// barrierProvider answers every call once n calls are waiting, so the tasks finish together and
// their completions reach the completer as one batch.
func barrierProvider(n int) taskorch.ChannelProvider {
	var mu sync.Mutex
	waiting := 0
	all := make(chan struct{})
	return taskorch.ChannelProviderFunc(func(ctx context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
		mu.Lock()
		waiting++
		if waiting == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(20 * time.Second):
		}
		return json.RawMessage(`{"id": "sent"}`), nil
	})
}

// Success handlers run in the completer's batched transactions: their writes commit with their
// completions, many tasks to a transaction, each exactly once.
func TestSuccessHandlersBatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, handlerBatchSQL)
	const n = 40
	startWorker(t, pool, &taskorch.WorkerConfig{Concurrency: n,
		Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: barrierProvider(n)}})
	var ids []int64
	for i := 1; i <= n; i++ {
		res, err := c.Enqueue(ctx, raw("email", fmt.Sprintf(`{"attempt": %d, "success_handler": "hb.on_success"}`, i)), nil)
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
	}
	for _, id := range ids {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	require.Equal(t, int64(n), scalar[int64](t, pool, `select count(*) from hb.fact`), "each handler ran once")
	txs := scalar[int64](t, pool, `select count(distinct tx) from hb.fact`)
	require.LessOrEqual(t, txs, int64(n/2), "the handlers of tasks finishing together share transactions")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.error where task_id = any($1)`, ids))
}

// A handler that raises inside a batch: the batch is rolled back and each task runs alone, so
// only the raising task fails (and is retried); the others complete once, and a handler's
// non-success answer is recorded in queues.error while its task completes.
func TestSuccessHandlerRaisingInBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, handlerBatchSQL)
	const n = 30
	startWorker(t, pool, &taskorch.WorkerConfig{Concurrency: n,
		Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: barrierProvider(n)}})
	var ids []int64
	var explode, refuse int64
	for i := 1; i <= n; i++ {
		extra := ""
		switch i {
		case 7:
			extra = `, "explode": true`
		case 8:
			extra = `, "refuse": true`
		}
		res, err := c.Enqueue(ctx, raw("email", fmt.Sprintf(`{"attempt": %d, "success_handler": "hb.on_success"%s}`, i, extra)),
			&taskorch.EnqueueOpts{MaxAttempts: 1})
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
		switch i {
		case 7:
			explode = res.TaskID
		case 8:
			refuse = res.TaskID
		}
	}
	for _, id := range ids {
		if id == explode {
			waitStatus(t, pool, id, taskorch.StatusDead)
			continue
		}
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	require.Equal(t, int64(n-1), scalar[int64](t, pool, `select count(*) from hb.fact`), "every handler but the raising one wrote once")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from hb.fact where attempt = 7`))
	require.Contains(t, lastError(t, pool, explode), "explode 7")
	require.Equal(t, "handler hb.on_success: validation failure: refused on purpose",
		scalar[string](t, pool, `select error_message from queues.error where task_id = $1`, refuse))
	require.Equal(t, int64(2), scalar[int64](t, pool, `select count(*) from queues.error where task_id = any($1)`, ids),
		"one error for the raising task's attempt, one for the refusal")
}

const beforeBatchSQL = `
create schema bb;
create table bb.log (attempt integer primary key, tx bigint not null);
create function bb.before(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if (_p ->> 'explode')::boolean then
        raise exception 'explode %', _p ->> 'attempt';
    end if;
    insert into bb.log (attempt, tx) values ((_p ->> 'attempt')::integer, txid_current());
    return jsonb_build_object('success', true, 'payload', jsonb_build_object('to', 'a@example.com', 'attempt', _p -> 'attempt'));
end $$;
grant usage on schema bb to worker_service_user;
grant execute on function bb.before(jsonb) to worker_service_user;
`

// Before handlers of tasks running together may run in shared statements (internal.run_functions),
// each once; one that raises fails its own task only (its batch is rolled back and each call
// runs alone), and every other task reaches its provider with its own request.
func TestBeforeHandlersBatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, beforeBatchSQL)
	const n = 40
	var mu sync.Mutex
	requests := map[int]int{} // attempt -> provider calls
	startWorker(t, pool, &taskorch.WorkerConfig{Concurrency: n,
		Channels: map[string]taskorch.ChannelProvider{taskorch.TypeEmail: taskorch.ChannelProviderFunc(
			func(_ context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
				var req struct{ Attempt int }
				if err := json.Unmarshal(call.Request, &req); err != nil {
					return nil, err
				}
				mu.Lock()
				requests[req.Attempt]++
				mu.Unlock()
				return json.RawMessage(`{}`), nil
			})}})
	ids := make([]int64, 0, n)
	var explode int64
	for i := 1; i <= n; i++ {
		extra := ""
		if i == 7 {
			extra = `, "explode": true`
		}
		res, err := c.Enqueue(ctx, raw("email", fmt.Sprintf(`{"attempt": %d, "before_handler": "bb.before"%s}`, i, extra)),
			&taskorch.EnqueueOpts{MaxAttempts: 1})
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
		if i == 7 {
			explode = res.TaskID
		}
	}
	for _, id := range ids {
		if id == explode {
			waitStatus(t, pool, id, taskorch.StatusDead)
			continue
		}
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	require.Contains(t, lastError(t, pool, explode), "before handler bb.before: ERROR: explode 7")
	require.Equal(t, int64(n-1), scalar[int64](t, pool, `select count(*) from bb.log`), "every before handler but the raising one wrote once")
	mu.Lock()
	seen := maps.Clone(requests)
	mu.Unlock()
	require.Len(t, seen, n-1, "every task but the raising one reached the provider")
	for attempt, calls := range seen {
		require.NotEqual(t, 7, attempt)
		require.Equal(t, 1, calls, "attempt %d", attempt)
	}

	// Without a raising one, every before handler runs once. (How many statements they shared
	// depends on timing: internal/batcher's tests pin the batching itself, and the benchmarks
	// measure what it saves.)
	mustExec(t, pool, `truncate bb.log`)
	ids = ids[:0]
	for i := 1; i <= n; i++ {
		res, err := c.Enqueue(ctx, raw("email", fmt.Sprintf(`{"attempt": %d, "before_handler": "bb.before"}`, i)), nil)
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
	}
	for _, id := range ids {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	require.Equal(t, int64(n), scalar[int64](t, pool, `select count(*) from bb.log`))
	require.Equal(t, int64(n), scalar[int64](t, pool, `select count(distinct attempt) from bb.log`))
}
