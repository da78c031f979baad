package transportsuite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// ackOutcomeSQL is the business side of TestTransportAckAfterOutcome, in schema ackt, granted as
// an application grants its functions: a db_function that succeeds and one that raises, and
// channel handlers that record facts by the task's "key". Then two fixtures of the test's
// database: outcomes (a running task leaving running) take 300ms to commit, as on a busy
// database, so that an acknowledgement sent before the commit is seen rather than raced; and
// retries are an hour away, so every task is claimed once.
const ackOutcomeSQL = `
create schema ackt;
create table ackt.fact (key text not null, kind text not null);
create function ackt.ok(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into ackt.fact values (_p->>'key', 'db_function');
    return jsonb_build_object('status', 'succeeded');
end $$;
create function ackt.raises(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    raise exception 'ackt.raises: %', _p->>'key';
end $$;
create function ackt.before(_p jsonb) returns jsonb
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select jsonb_build_object('success', true, 'payload', jsonb_build_object('key', _p->>'key', 'built_by', 'ackt.before'))
$$;
create function ackt.on_success(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into ackt.fact values (_p->'original_payload'->>'key', 'success');
    return jsonb_build_object('status', 'succeeded');
end $$;
create function ackt.on_error(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into ackt.fact values (_p->'original_payload'->>'key', 'error');
    return jsonb_build_object('status', 'succeeded');
end $$;
revoke all on all functions in schema ackt from public;
grant usage on schema ackt to worker_service_user;
grant execute on function ackt.ok(jsonb), ackt.raises(jsonb), ackt.before(jsonb), ackt.on_success(jsonb), ackt.on_error(jsonb)
    to worker_service_user;

create function ackt.slow_outcome() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    if exists (select 1 from old_rows o join new_rows n using (task_id) where o.status = 'running' and n.status <> 'running') then
        perform pg_sleep(0.3);
    end if;
    return null;
end $$;
create trigger ackt_slow_outcome after update on queues.task
    referencing old table as old_rows new table as new_rows
    for each statement execute function ackt.slow_outcome();

create or replace function queues.retry_delay(_attempt integer) returns interval
    language sql volatile as $$ select interval '1 hour' $$;
`

// ackKind is one kind of task and the outcome it must reach.
type ackKind struct {
	name    string
	typ     string
	payload map[string]any // the task's payload, besides its key
	status  taskorch.Status
	attempt int
	fact    string // the fact recorded in ackt.fact under the task's key, if any
}

func ackKinds() []ackKind {
	kinds := []ackKind{
		{name: "Go handler succeeds", typ: "ack_ok", status: taskorch.StatusCompleted, attempt: 1},
		{name: "Go handler fails (retry)", typ: "ack_fail", status: taskorch.StatusPending, attempt: 1},
		{name: "Go handler snoozes", typ: "ack_snooze", status: taskorch.StatusPending, attempt: 0},
		{name: "Go handler discards", typ: "ack_discard", status: taskorch.StatusFailed, attempt: 1},
		{name: "db_function succeeds", typ: taskorch.TypeDBFunction, payload: map[string]any{"db_function": "ackt.ok"},
			status: taskorch.StatusCompleted, attempt: 1, fact: "db_function"},
		{name: "db_function raises (retry)", typ: taskorch.TypeDBFunction, payload: map[string]any{"db_function": "ackt.raises"},
			status: taskorch.StatusPending, attempt: 1},
	}
	handlers := []struct {
		name                    string
		before, success, failed bool
	}{
		{name: "no handlers"},
		{name: "before handler only", before: true},
		{name: "all handlers", before: true, success: true, failed: true},
		{name: "success handler only", success: true},
		{name: "error handler only", failed: true},
	}
	for _, typ := range taskorch.ChannelTypes {
		for _, h := range handlers {
			for _, fail := range []bool{false, true} {
				k := ackKind{typ: typ, payload: map[string]any{"fail": fail}, status: taskorch.StatusCompleted, attempt: 1}
				if h.before {
					k.payload["before_handler"] = "ackt.before"
				}
				if h.success {
					k.payload["success_handler"] = "ackt.on_success"
				}
				if h.failed {
					k.payload["error_handler"] = "ackt.on_error"
				}
				owned := h.success || h.failed // a supervisor's task: completed whatever the provider said
				switch {
				case !fail:
					k.name = h.name + ", provider succeeds"
					if h.success {
						k.fact = "success"
					}
				case owned:
					k.name = h.name + ", provider fails"
					if h.failed {
						k.fact = "error"
					}
				default:
					k.name = h.name + ", provider fails (retry)"
					k.status = taskorch.StatusPending
				}
				kinds = append(kinds, k)
			}
		}
	}
	return kinds
}

// A transport's message is acknowledged only after the outcome it led to is committed
// (docs/transports.md, "Acknowledgement after commit"): a worker that dies in between leaves the
// message to be delivered again, and the task is not lost. For each transport and each kind of
// task — Go handlers that succeed, fail, snooze and discard; db_function tasks that succeed and
// raise; each channel type with and without before/success/error handlers, its provider
// succeeding and failing — a worker runs the tasks through its real transport wrapped by
// ackChecker, which checks in the database, before each acknowledgement goes out, that the
// task's outcome is committed. Under the postgres transport there are no messages: every task
// reaches its outcome.
func TestTransportAckAfterOutcome(t *testing.T) {
	t.Parallel()
	for _, name := range []string{transportPostgres, transportRedis, transportSQS} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testAckAfterOutcome(t, name)
		})
	}
}

func testAckAfterOutcome(t *testing.T, transportName string) {
	const copies = 2
	ctx := context.Background()
	pool := dbtest.NewDBWith(t, dbtest.DBOptions{MaxConns: 20})
	mustExec(t, pool, ackOutcomeSQL)

	kinds := ackKinds()
	var types, payloads, keys []string
	byKey := map[string]ackKind{}
	for _, k := range kinds {
		for i := range copies {
			key := fmt.Sprintf("%s: %s #%d", k.typ, k.name, i+1)
			p := map[string]any{"key": key}
			for f, v := range k.payload {
				p[f] = v
			}
			payload, err := json.Marshal(p)
			require.NoError(t, err)
			types, payloads, keys = append(types, k.typ), append(payloads, string(payload)), append(keys, key)
			byKey[key] = k
		}
	}

	hs := taskorch.NewHandlers()
	hs.HandleFunc("ack_ok", func(context.Context, *taskorch.Task) error { return nil })
	hs.HandleFunc("ack_fail", func(context.Context, *taskorch.Task) error { return errors.New("handler failed (test)") })
	hs.HandleFunc("ack_snooze", func(context.Context, *taskorch.Task) error { return taskorch.Snooze(time.Hour) })
	hs.HandleFunc("ack_discard", func(context.Context, *taskorch.Task) error {
		return taskorch.Discard(errors.New("handler discarded (test)"))
	})
	provider := taskorch.ChannelProviderFunc(func(_ context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
		var p struct {
			Fail bool `json:"fail"`
		}
		if err := json.Unmarshal(call.Task.Payload, &p); err != nil {
			return nil, err
		}
		if p.Fail {
			return nil, errors.New("provider down (test)")
		}
		return json.RawMessage(fmt.Sprintf(`{"id": "sent-%d"}`, call.Task.ID)), nil
	})
	channels := map[string]taskorch.ChannelProvider{}
	for _, typ := range taskorch.ChannelTypes {
		channels[typ] = provider
	}

	taskKey := map[int64]string{} // filled before the worker starts
	cfg := taskorch.WorkerConfig{
		ID: "ack-" + transportName, Handlers: hs, Channels: channels, Concurrency: 8, LeaseDuration: 30 * time.Second,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError})),
	}
	var check *ackChecker
	if transportName != transportPostgres {
		check = newAckChecker(t, pool, cfg.ID, func(id int64) string { return taskKey[id] })
		useCheckedTransport(t, &cfg, transportName, check)
	}

	ids := scalar[[]int64](t, pool, `select queues.enqueue_many($1::text[], $2::text[]::jsonb[])`, types, payloads)
	require.Len(t, ids, len(keys))
	for i, id := range ids {
		taskKey[id] = keys[i]
	}
	start := time.Now()
	startWorker(t, pool, &cfg)

	// Every task reaches its outcome.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		rows, err := pool.Query(ctx, `select t.task_id, t.status::text, t.attempt,
				coalesce((select string_agg(f.kind, ',' order by f.kind) from ackt.fact f where f.key = t.payload->>'key'), '')
			from queues.task t where t.task_id = any($1) order by t.task_id`, ids)
		require.NoError(ct, err)
		defer rows.Close()
		n := 0
		for rows.Next() {
			var id int64
			var status, facts string
			var attempt int
			require.NoError(ct, rows.Scan(&id, &status, &attempt, &facts))
			n++
			k := byKey[taskKey[id]]
			assert.Equal(ct, fmt.Sprintf("%s, attempt %d, facts [%s]", k.status, k.attempt, k.fact),
				fmt.Sprintf("%s, attempt %d, facts [%s]", status, attempt, facts), "%s: task %d (%s)", transportName, id, taskKey[id])
		}
		require.NoError(ct, rows.Err())
		assert.Len(ct, ids, n)
	}, 30*time.Second, 20*time.Millisecond, "%s: every task reaches its outcome", transportName)
	if check == nil {
		t.Logf("%s: %d tasks of %d kinds reached their outcomes in %s", transportName, len(ids), len(kinds), time.Since(start).Round(time.Millisecond))
		return
	}

	// Every task's message is acknowledged, each checked first.
	require.Eventually(t, func() bool { return check.ackedAll(ids) }, 30*time.Second, 20*time.Millisecond,
		"%s: a message of every task acknowledged", transportName)
	violations, errs, received, acked := check.report()
	t.Logf("%s: %d tasks of %d kinds reached their outcomes in %s; %d messages received, %d acknowledged, %d acknowledged before the outcome was committed",
		transportName, len(ids), len(kinds), time.Since(start).Round(time.Millisecond), received, acked, len(violations))
	require.Empty(t, errs, "the checker could not check")
	if len(violations) > 0 {
		sort.Strings(violations)
		t.Errorf("%d message(s) acknowledged before the outcome of their claim was committed (a worker dying then would lose the task's delivery):\n  %s",
			len(violations), strings.Join(violations, "\n  "))
	}
}
