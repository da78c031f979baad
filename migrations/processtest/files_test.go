package processtest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The file-deletion process with a provider that fails once: two attempts, the file marked
// deleted, the process terminal.
func TestFileDeletionRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 3)
	store := &scripted{failures: []error{errors.New("storage: 503 slow down")}}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: store})

	file := scalar[int64](t, pool, `insert into files.file (bucket, object_key) values ('uploads', 'a/b.wav') returning file_id`)
	id := scalar[int64](t, pool, `select file_deletion_task_id from files.kickoff_file_deletion($1)`, file)
	waitTrue(t, pool, "the terminal success fact",
		`select exists (select 1 from files.file_deletion_task_succeeded where file_deletion_task_id = $1)`, id)
	quiet(t, pool, "file_deletion_task_id", id)

	require.True(t, scalar[bool](t, pool, `select (metadata ->> 'deleted')::boolean from files.file where file_id = $1`, file))
	require.Equal(t, 2, scalar[int](t, pool, `select files.count_file_deletion_attempts($1)`, id))
	require.Equal(t, 1, scalar[int](t, pool, `select files.count_file_deletion_failed_attempts($1)`, id))
	require.False(t, scalar[bool](t, pool, `select files.is_file_deletion_stuck($1)`, file))
	calls := store.Calls()
	require.Len(t, calls, 2)
	require.Equal(t, "uploads", calls[1].request["bucket"])
	require.Equal(t, "a/b.wav", calls[1].request["object_key"])

	// The kickoff is idempotent per file.
	require.Equal(t, id, scalar[int64](t, pool, `select file_deletion_task_id from files.kickoff_file_deletion($1)`, file))
	require.Equal(t, "kickoff_file_deletion: file 999999 does not exist",
		scalar[string](t, pool, `select validation_failure_message from files.kickoff_file_deletion(999999)`))
}

// After max attempts (each failure retriable) the file-deletion process is stuck and terminal;
// the file is not marked.
func TestFileDeletionStuck(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	fastProcesses(t, pool, 2)
	unavailable := errors.New("storage: 503 ServiceUnavailable")
	store := &scripted{failures: []error{unavailable, unavailable, unavailable}}
	startWorker(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeFileDelete: store})

	file := scalar[int64](t, pool, `insert into files.file (bucket, object_key) values ('nope', 'x') returning file_id`)
	id := scalar[int64](t, pool, `select file_deletion_task_id from files.kickoff_file_deletion($1)`, file)
	waitTrue(t, pool, "the terminal failure fact",
		`select exists (select 1 from files.file_deletion_task_failed where file_deletion_task_id = $1)`, id)
	quiet(t, pool, "file_deletion_task_id", id)
	require.True(t, scalar[bool](t, pool, `select files.is_file_deletion_stuck($1)`, file))
	require.Equal(t, 2, scalar[int](t, pool, `select files.count_file_deletion_failed_attempts($1)`, id))
	require.Contains(t, scalar[string](t, pool, `select error_message from files.file_deletion_task_failed where file_deletion_task_id = $1`, id),
		"file not deleted after 2 failed attempts (max 2); last error: file_delete provider: storage: 503 ServiceUnavailable")
	require.False(t, scalar[bool](t, pool, `select metadata ? 'deleted' from files.file where file_id = $1`, file))
	require.Len(t, store.Calls(), 2)
}
