package processtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// brokenObject is a file storage that cannot delete one object until fixed, and holds the
// deletion of another until released; it counts the calls per object key.
type brokenObject struct {
	broken  string        // fails while fixed is false
	slow    string        // waits for release
	held    chan struct{} // receives once per held call, when there is room
	release chan struct{}

	mu    sync.Mutex
	fixed bool
	calls map[string]int
}

func newBrokenObject(broken, slow string) *brokenObject {
	return &brokenObject{broken: broken, slow: slow, held: make(chan struct{}, 1), release: make(chan struct{}), calls: map[string]int{}}
}

func (b *brokenObject) Call(ctx context.Context, c taskorch.ChannelCall) (json.RawMessage, error) {
	var req struct {
		ObjectKey string `json:"object_key"`
	}
	if err := json.Unmarshal(c.Request, &req); err != nil {
		return nil, taskorch.Discard(err)
	}
	b.mu.Lock()
	b.calls[req.ObjectKey]++
	fixed := b.fixed
	b.mu.Unlock()
	switch {
	case req.ObjectKey == b.broken && !fixed:
		return nil, errors.New("storage: 503 SlowDown")
	case req.ObjectKey == b.slow:
		select {
		case b.held <- struct{}{}:
		default:
		}
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return json.RawMessage(`{"deleted":true}`), nil
}

func (b *brokenObject) fix() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fixed = true
}

func (b *brokenObject) callsFor(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[key]
}

func objectKey(t *testing.T, db taskorch.DBTX, file int64) string {
	t.Helper()
	return scalar[string](t, db, `select object_key from files.file where file_id = $1`, file)
}

// failedAccountDeletion requests the deletion of account and waits until it failed and its
// supervisors stopped.
func failedAccountDeletion(t *testing.T, db taskorch.DBTX, account int64) int64 {
	t.Helper()
	id := scalar[int64](t, db, `select account_deletion_task_id from api.request_account_deletion($1)`, account)
	waitTrue(t, db, "the account deletion's failure",
		`select exists (select 1 from accounts.account_deletion_task_failed where account_deletion_task_id = $1)`, id)
	quiet(t, db, "account_deletion_task_id", id)
	return id
}

// An account deletion that failed because one of its two file deletions failed (the storage
// refused that object), retried by hand once the storage is fixed: the restart fact with the
// reason; the failed file deletion restarted (its own restart fact, reason naming the account
// deletion), the one that succeeded left alone; the file deleted on a third call, the account
// anonymized, the account deletion succeeded. Run 1's failures stay; `processes show` lists
// the restart and run 1's failure.
func TestRetryAccountDeletionRestartsFailedFileDeletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	account, files := newAccount(t, pool, 2)
	store := newBrokenObject(objectKey(t, pool, files[1]), "")
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: store})

	id := failedAccountDeletion(t, pool, account)
	bad := scalar[int64](t, pool, `select file_deletion_task_id from files.file_deletion_task where file_id = $1`, files[1])
	good := scalar[int64](t, pool, `select file_deletion_task_id from files.file_deletion_task where file_id = $1`, files[0])
	quiet(t, pool, "file_deletion_task_id", bad)
	x := getInstance(t, pool, "accounts.account_deletion", id)
	require.Equal(t, "failed", x.State)
	require.Contains(t, *x.Error, "file deletion stuck for file "+itoa(files[1]))
	require.Contains(t, *x.Error, "storage: 503 SlowDown")
	require.Equal(t, "failed", getInstance(t, pool, "files.file_deletion", bad).State)
	require.Equal(t, "succeeded", getInstance(t, pool, "files.file_deletion", good).State)
	require.False(t, scalar[bool](t, pool, `select exists (select 1 from accounts.account_anonymization_task where account_id = $1)`, account))
	require.Equal(t, 2, store.callsFor(objectKey(t, pool, files[1])))

	store.fix()
	var (
		process, reason string
		run             int
	)
	require.NoError(t, pool.QueryRow(ctx,
		`select process, run, reason from queues.retry_process('accounts.account_deletion', $1, ' storage fixed ')`, id).
		Scan(&process, &run, &reason))
	require.Equal(t, "accounts.account_deletion", process)
	require.Equal(t, 2, run)
	require.Equal(t, "storage fixed", reason)
	require.Equal(t, []string{"account deletion " + itoa(id) + " retried: storage fixed"}, scalar[[]string](t, pool,
		`select array_agg(reason) from files.file_deletion_task_restarted where file_deletion_task_id = $1`, bad),
		"the failed file deletion restarted, saying why")
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from files.file_deletion_task_restarted where file_deletion_task_id = $1`, good))
	require.NotEqual(t, "failed", getInstance(t, pool, "accounts.account_deletion", id).State, "restarted: running or waiting")

	waitTrue(t, pool, "the account deletion's success",
		`select exists (select 1 from accounts.account_deletion_task_succeeded where account_deletion_task_id = $1)`, id)
	quiet(t, pool, "account_deletion_task_id", id)
	require.Equal(t, "succeeded", getInstance(t, pool, "accounts.account_deletion", id).State)
	require.Equal(t, "succeeded", getInstance(t, pool, "files.file_deletion", bad).State)
	require.True(t, scalar[bool](t, pool, `select (metadata ->> 'deleted')::boolean from files.file where file_id = $1`, files[1]))
	require.True(t, scalar[bool](t, pool, `select accounts.has_account_flag($1, 'anonymized')`, account))
	require.Equal(t, 3, store.callsFor(objectKey(t, pool, files[1])), "two failures of run 1, then one success")
	require.Equal(t, 1, store.callsFor(objectKey(t, pool, files[0])), "the deleted file is not deleted again")

	require.Equal(t, []int32{1}, scalar[[]int32](t, pool,
		`select array_agg(run order by run) from accounts.account_deletion_task_failed where account_deletion_task_id = $1`, id), "run 1's failure stays")
	require.Equal(t, []int32{1}, scalar[[]int32](t, pool,
		`select array_agg(run order by run) from files.file_deletion_task_failed where file_deletion_task_id = $1`, bad))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from accounts.account_deletion_task_restarted where account_deletion_task_id = $1`, id))

	d, err := admin.ShowProcessInstance(ctx, pool, "accounts.account_deletion", id)
	require.NoError(t, err)
	require.Len(t, d.Restarts, 1)
	require.Equal(t, "storage fixed", d.Restarts[0].Reason)
	require.Len(t, d.EarlierFailures, 1)
	require.Equal(t, 1, d.EarlierFailures[0].Run)
	require.Contains(t, d.EarlierFailures[0].Error, "file deletion stuck")
}

// An account deletion that failed on its anonymization: retrying the anonymization alone makes
// it succeed and leaves the account deletion failed (docs/processes.md); retrying the account
// deletion then finds nothing failed under it, restarts nothing, and succeeds.
func TestRetryAccountDeletionAfterAnonymization(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	mustExec(t, pool, `create table public.anonymizer_fixed (fixed boolean)`)
	mustExec(t, pool, `create or replace function accounts.anonymize_account(_account_id bigint) returns void
		language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
		begin
			if not exists (select 1 from public.anonymizer_fixed) then
				raise exception 'anonymization backend unavailable for account %', _account_id;
			end if;
			update accounts.account set email = null, display_name = null where account_id = _account_id;
			insert into accounts.account_flag (account_id, flag) values (_account_id, 'anonymized') on conflict do nothing;
		end $$`)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: &scripted{}})
	account, _ := newAccount(t, pool, 1)

	id := failedAccountDeletion(t, pool, account)
	anon := scalar[int64](t, pool, `select account_anonymization_task_id from accounts.account_anonymization_task where account_id = $1`, account)
	waitTrue(t, pool, "the anonymization's failure",
		`select exists (select 1 from accounts.account_anonymization_task_failed where account_anonymization_task_id = $1)`, anon)
	quiet(t, pool, "account_anonymization_task_id", anon)
	require.Equal(t, "failed", getInstance(t, pool, "accounts.account_anonymization", anon).State)

	mustExec(t, pool, `insert into public.anonymizer_fixed values (true)`)
	require.Equal(t, 2, scalar[int](t, pool, `select run from queues.retry_process('accounts.account_anonymization', $1, 'backend back')`, anon))
	waitTrue(t, pool, "the anonymization's success",
		`select exists (select 1 from accounts.account_anonymization_task_succeeded where account_anonymization_task_id = $1)`, anon)
	quiet(t, pool, "account_anonymization_task_id", anon)
	x := getInstance(t, pool, "accounts.account_anonymization", anon)
	require.Equal(t, "succeeded", x.State)
	require.EqualValues(t, 3, *x.Attempts, "two of run 1, one of run 2")
	require.Equal(t, 1, scalar[int](t, pool, `select accounts.count_account_anonymization_attempts($1)`, anon), "the current run's")
	require.Equal(t, "failed", getInstance(t, pool, "accounts.account_deletion", id).State, "the parent is not restarted by its child")

	require.Equal(t, 2, scalar[int](t, pool, `select run from queues.retry_process('accounts.account_deletion', $1, 'anonymizer fixed')`, id))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from accounts.account_anonymization_task_restarted`), "nothing more restarted")
	waitTrue(t, pool, "the account deletion's success",
		`select exists (select 1 from accounts.account_deletion_task_succeeded where account_deletion_task_id = $1)`, id)
	quiet(t, pool, "account_deletion_task_id", id)
	require.True(t, scalar[bool](t, pool, `select accounts.has_account_flag($1, 'anonymized')`, account))
	require.Equal(t, []int32{1}, scalar[[]int32](t, pool,
		`select array_agg(run) from accounts.account_deletion_task_failed where account_deletion_task_id = $1`, id))
}

// Retrying a failed account deletion whose anonymization failed restarts the anonymization
// too: its own restart fact, with the reason naming the account deletion; then both succeed.
func TestRetryAccountDeletionRestartsAnonymization(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	mustExec(t, pool, `create table public.anonymizer_fixed (fixed boolean)`)
	mustExec(t, pool, `create or replace function accounts.anonymize_account(_account_id bigint) returns void
		language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
		begin
			if not exists (select 1 from public.anonymizer_fixed) then
				raise exception 'anonymization backend unavailable for account %', _account_id;
			end if;
			update accounts.account set email = null, display_name = null where account_id = _account_id;
			insert into accounts.account_flag (account_id, flag) values (_account_id, 'anonymized') on conflict do nothing;
		end $$`)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: &scripted{}})
	account, _ := newAccount(t, pool, 0)
	id := failedAccountDeletion(t, pool, account)
	anon := scalar[int64](t, pool, `select account_anonymization_task_id from accounts.account_anonymization_task where account_id = $1`, account)
	waitTrue(t, pool, "the anonymization's failure",
		`select exists (select 1 from accounts.account_anonymization_task_failed where account_anonymization_task_id = $1)`, anon)
	quiet(t, pool, "account_anonymization_task_id", anon)

	mustExec(t, pool, `insert into public.anonymizer_fixed values (true)`)
	mustExec(t, pool, `select queues.retry_process('accounts.account_deletion', $1, 'anonymizer fixed')`, id)
	require.Equal(t, []string{"account deletion " + itoa(id) + " retried: anonymizer fixed"}, scalar[[]string](t, pool,
		`select array_agg(reason) from accounts.account_anonymization_task_restarted where account_anonymization_task_id = $1`, anon))
	waitTrue(t, pool, "the account deletion's success",
		`select exists (select 1 from accounts.account_deletion_task_succeeded where account_deletion_task_id = $1)`, id)
	quiet(t, pool, "account_deletion_task_id", id)
	quiet(t, pool, "account_anonymization_task_id", anon)
	require.Equal(t, "succeeded", getInstance(t, pool, "accounts.account_anonymization", anon).State)
	require.True(t, scalar[bool](t, pool, `select email is null from accounts.account where account_id = $1`, account))
}

// Refusals of the account deletion's and the anonymization's retries: a running (a file at the
// storage), a succeeded and a missing instance, no reason, a reason too long; each with its
// SQLSTATE and message, and nothing written. The worker role may not retry.
func TestRetryAccountDeletionRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 1)
	slowAccount, slowFiles := newAccount(t, pool, 1)
	store := newBrokenObject("", objectKey(t, pool, slowFiles[0]))
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: store})
	t.Cleanup(func() { close(store.release) }) // before the worker stops (cleanups run last first)

	doneAccount, _ := newAccount(t, pool, 0)
	done := scalar[int64](t, pool, `select account_deletion_task_id from api.request_account_deletion($1)`, doneAccount)
	waitTrue(t, pool, "succeeded", `select exists (select 1 from accounts.account_deletion_task_succeeded where account_deletion_task_id = $1)`, done)
	doneAnon := scalar[int64](t, pool, `select account_anonymization_task_id from accounts.account_anonymization_task where account_id = $1`, doneAccount)
	running := scalar[int64](t, pool, `select account_deletion_task_id from api.request_account_deletion($1)`, slowAccount)
	<-store.held
	require.Equal(t, "running", getInstance(t, pool, "accounts.account_deletion", running).State)

	long := strings.Repeat("x", 2001)
	for _, c := range []struct {
		sql    string
		id     int64
		reason any
		code   string
		msg    string
	}{
		{`select queues.retry_process('accounts.account_deletion', $1, $2)`, done, "  ", "22023", "retry_process: a reason is required"},
		{`select accounts.retry_account_deletion($1, $2)`, done, nil, "22023", "retry_account_deletion: a reason is required"},
		{`select accounts.retry_account_deletion($1, $2)`, done, " ", "22023", "retry_account_deletion: a reason is required"},
		{`select queues.retry_process('accounts.account_deletion', $1, $2)`, done, long, "22023", "retry_account_deletion: the reason must be at most 2000 characters, got 2001"},
		{`select queues.retry_process('accounts.account_deletion', $1, $2)`, 999999, "why", "P0002", "retry_account_deletion: accounts.account_deletion has no instance 999999"},
		{`select queues.retry_process('accounts.account_deletion', $1, $2)`, done, "why", "55000", "accounts.account_deletion " + itoa(done) + " succeeded; only a failed instance can be retried"},
		{`select queues.retry_process('accounts.account_deletion', $1, $2)`, running, "why", "55000", "accounts.account_deletion " + itoa(running) + " is running, not failed; only a failed instance can be retried"},
		{`select accounts.retry_account_anonymization($1, $2)`, doneAnon, "", "22023", "retry_account_anonymization: a reason is required"},
		{`select queues.retry_process('accounts.account_anonymization', $1, $2)`, doneAnon, long, "22023", "retry_account_anonymization: the reason must be at most 2000 characters"},
		{`select queues.retry_process('accounts.account_anonymization', $1, $2)`, 999999, "why", "P0002", "retry_account_anonymization: accounts.account_anonymization has no instance 999999"},
		{`select queues.retry_process('accounts.account_anonymization', $1, $2)`, doneAnon, "why", "55000", "accounts.account_anonymization " + itoa(doneAnon) + " succeeded; only a failed instance can be retried"},
	} {
		// The supervisor tasks of the instance the call names (a retry would enqueue one). Not
		// of the running instance: its own supervisor enqueues its next turn meanwhile.
		supervisor := "accounts.account_deletion_supervisor"
		if strings.Contains(c.sql, "anonymization") {
			supervisor = "accounts.account_anonymization_supervisor"
		}
		supervisorTasks := func() int {
			return scalar[int](t, pool, `select count(*)::int from queues.task
				where payload->>'db_function' = $1 and internal.process_instance_id(payload) = $2`, supervisor, c.id)
		}
		before := supervisorTasks()
		_, err := pool.Exec(ctx, c.sql, c.id, c.reason)
		require.Error(t, err, c)
		require.Equal(t, c.code, pgCode(t, err), c)
		require.ErrorContains(t, err, c.msg, c)
		if c.id != running {
			require.Equal(t, before, supervisorTasks(), "no task enqueued: %v", c)
		}
	}
	require.Zero(t, scalar[int](t, pool, `select (select count(*) from accounts.account_deletion_task_restarted)
		+ (select count(*) from accounts.account_anonymization_task_restarted)
		+ (select count(*) from files.file_deletion_task_restarted)`), "nothing written")
	require.Equal(t, "running", getInstance(t, pool, "accounts.account_deletion", running).State)
	require.Equal(t, "succeeded", getInstance(t, pool, "accounts.account_deletion", done).State)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	mustExec(t, tx, `set local role worker_service_user`)
	_, err = tx.Exec(ctx, `select accounts.retry_account_deletion($1, 'why')`, done)
	require.ErrorContains(t, err, "permission denied")
}

// Two operators retry the same failed account deletion at once, on two connections: one
// restart of it and of its failed file deletion; the other waits for the first's lock and is
// refused, the account deletion running by then.
func TestRetryAccountDeletionConcurrentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 1)
	account, files := newAccount(t, pool, 1)
	store := newBrokenObject(objectKey(t, pool, files[0]), "")
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: store})
	id := failedAccountDeletion(t, pool, account)
	fd := scalar[int64](t, pool, `select file_deletion_task_id from files.file_deletion_task where file_id = $1`, files[0])
	quiet(t, pool, "file_deletion_task_id", fd)

	first, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	require.Equal(t, 2, scalar[int](t, first, `select run from queues.retry_process('accounts.account_deletion', $1, 'first')`, id))

	second, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer second.Release()
	pid := scalar[int32](t, second, `select pg_backend_pid()`)
	res := make(chan error, 1)
	go func() {
		_, err := second.Exec(ctx, `select queues.retry_process('accounts.account_deletion', $1, 'second')`, id)
		res <- err
	}()
	waitTrue(t, pool, "the second retry to wait for the first's lock",
		`select exists (select 1 from pg_stat_activity where pid = $1 and wait_event_type = 'Lock')`, pid)
	require.NoError(t, first.Commit(ctx))
	err = <-res
	require.Equal(t, "55000", pgCode(t, err))
	require.ErrorContains(t, err, "is running, not failed")
	require.Equal(t, []string{"first"}, scalar[[]string](t, pool,
		`select array_agg(reason) from accounts.account_deletion_task_restarted where account_deletion_task_id = $1`, id))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from files.file_deletion_task_restarted where file_deletion_task_id = $1`, fd))
}
