package processtest_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// newAccount makes an account with n files.
func newAccount(t *testing.T, pool *pgxpool.Pool, n int) (account int64, files []int64) {
	t.Helper()
	account = scalar[int64](t, pool, `insert into accounts.account (email, display_name) values ('ann@example.com', 'Ann') returning account_id`)
	files = scalar[[]int64](t, pool, `with ins as (
		insert into files.file (bucket, object_key, owner_account_id)
		select 'recordings', format('acct-%s/rec-%s.wav', $1::bigint, i), $1 from generate_series(1, $2::int) i
		returning file_id) select coalesce(array_agg(file_id order by file_id), '{}') from ins`, account, n)
	return account, files
}

// An account deletion, the happy path: deletion requested -> 'deleted' flag and one
// account_deletion_task -> each file has a file_deletion_task, a success fact and "deleted": true
// -> an account_anonymization_task and the 'anonymized' flag -> account_deletion_task_succeeded.
func TestAccountDeletionHappyPath(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	store := &scripted{}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: store})
	account, files := newAccount(t, pool, 3)

	id := scalar[int64](t, pool, `select account_deletion_task_id from api.request_account_deletion($1)`, account)
	require.True(t, scalar[bool](t, pool, `select accounts.has_account_flag($1, 'deleted')`, account))
	require.Equal(t, 1, scalar[int](t, pool, `select count(*)::int from accounts.account_deletion_task where account_id = $1`, account))
	// Requesting again changes nothing.
	require.Equal(t, id, scalar[int64](t, pool, `select account_deletion_task_id from api.request_account_deletion($1)`, account))

	waitTrue(t, pool, "account_deletion_task_succeeded",
		`select exists (select 1 from accounts.account_deletion_task_succeeded where account_deletion_task_id = $1)`, id)
	quiet(t, pool, "account_deletion_task_id", id)

	for _, f := range files {
		require.True(t, scalar[bool](t, pool, `select exists (select 1 from files.file_deletion_task d
			join files.file_deletion_task_succeeded s using (file_deletion_task_id) where d.file_id = $1)`, f))
		require.True(t, scalar[bool](t, pool, `select (metadata ->> 'deleted')::boolean from files.file where file_id = $1`, f))
	}
	require.True(t, scalar[bool](t, pool, `select exists (select 1 from accounts.account_anonymization_task where account_id = $1)`, account))
	require.True(t, scalar[bool](t, pool, `select accounts.has_account_flag($1, 'anonymized')`, account))
	require.True(t, scalar[bool](t, pool, `select email is null and display_name is null from accounts.account where account_id = $1`, account))
	require.Len(t, store.Calls(), 3)
	require.False(t, scalar[bool](t, pool, `select exists (select 1 from accounts.account_deletion_task_failed)`))
}

// File-deletion stuck path: the file deletions keep failing, file_deletion_attempt_failed
// accumulates, is_file_deletion_stuck turns true after max attempts, and the root task fails with
// a message naming the stuck file; the supervisor stops.
func TestAccountDeletionFileStuck(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	bad := errors.New("storage: 404 NoSuchBucket")
	store := &scripted{failures: []error{bad, bad, bad, bad}}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: store})
	account, files := newAccount(t, pool, 1)

	id := scalar[int64](t, pool, `select account_deletion_task_id from api.request_account_deletion($1)`, account)
	waitTrue(t, pool, "account_deletion_task_failed",
		`select exists (select 1 from accounts.account_deletion_task_failed where account_deletion_task_id = $1)`, id)
	quiet(t, pool, "account_deletion_task_id", id)
	quiet(t, pool, "file_id", files[0])

	require.True(t, scalar[bool](t, pool, `select files.is_file_deletion_stuck($1)`, files[0]))
	require.Equal(t, 2, scalar[int](t, pool, `select count(*)::int from files.file_deletion_attempt a
		join files.file_deletion_attempt_failed using (file_deletion_attempt_id)
		join files.file_deletion_task t using (file_deletion_task_id) where t.file_id = $1`, files[0]))
	msg := scalar[string](t, pool, `select error_message from accounts.account_deletion_task_failed where account_deletion_task_id = $1`, id)
	require.Contains(t, msg, "file deletion stuck for file")
	require.Contains(t, msg, "recordings/acct-")
	require.False(t, scalar[bool](t, pool, `select exists (select 1 from accounts.account_anonymization_task where account_id = $1)`, account),
		"no anonymization while a file could not be deleted")
	require.False(t, scalar[bool](t, pool, `select accounts.has_account_flag($1, 'anonymized')`, account))
}

// Anonymization stuck path: anonymize_account raises; account_anonymization_attempt_failed
// accumulates, is_account_anonymization_stuck turns true, and the root task fails naming it.
func TestAccountDeletionAnonymizationStuck(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	mustExec(t, pool, `create or replace function accounts.anonymize_account(_account_id bigint) returns void
		language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
		begin
			update accounts.account set email = null where account_id = _account_id;  -- rolled back by the raise
			raise exception 'anonymization backend unavailable for account %', _account_id;
		end $$`)
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: &scripted{}})
	account, _ := newAccount(t, pool, 0)

	id := scalar[int64](t, pool, `select account_deletion_task_id from api.request_account_deletion($1)`, account)
	waitTrue(t, pool, "account_deletion_task_failed",
		`select exists (select 1 from accounts.account_deletion_task_failed where account_deletion_task_id = $1)`, id)
	quiet(t, pool, "account_deletion_task_id", id)

	anon := scalar[int64](t, pool, `select account_anonymization_task_id from accounts.account_anonymization_task where account_id = $1`, account)
	quiet(t, pool, "account_anonymization_task_id", anon)
	require.Equal(t, 3, scalar[int](t, pool, `select accounts.count_account_anonymization_failed_attempts($1)`, anon))
	require.True(t, scalar[bool](t, pool, `select accounts.is_account_anonymization_stuck($1)`, account))
	// The deletion supervisor may see the anonymization stuck (every attempt failed) before the
	// anonymization's own supervisor has recorded its terminal fact; it then records the stuck
	// state without the last error. Both orders end the process failed, and say why.
	msg := scalar[string](t, pool, `select error_message from accounts.account_deletion_task_failed where account_deletion_task_id = $1`, id)
	if msg != "account "+itoa(account)+": account anonymization stuck: attempts exhausted" {
		require.Contains(t, msg,
			"account anonymization stuck: account "+itoa(account)+" not anonymized after 3 failed attempts (max 3); last error: anonymization backend unavailable")
	}
	require.Equal(t, "ann@example.com", scalar[string](t, pool, `select email from accounts.account where account_id = $1`, account),
		"each failed attempt is rolled back")
	require.False(t, scalar[bool](t, pool, `select accounts.has_account_flag($1, 'anonymized')`, account))
}

func TestRequestAccountDeletionBadInput(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	require.Equal(t, "kickoff_account_deletion: account 424242 does not exist",
		scalar[string](t, pool, `select validation_failure_message from api.request_account_deletion(424242)`))
	require.Equal(t, "kickoff_account_deletion: account_id is required",
		scalar[string](t, pool, `select validation_failure_message from api.request_account_deletion(null)`))
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from queues.task`))
	require.Zero(t, scalar[int](t, pool, `select count(*)::int from accounts.account_flag`))
}
