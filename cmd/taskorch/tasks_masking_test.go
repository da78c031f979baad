package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// tasks show and tasks list print a task's secrets masked, in the tables and in --json: the
// payload's secret keys at any depth, URL passwords in its strings and in error messages, and
// the error's context. What is not a secret still shows.
func TestTasksCommandsMaskSecrets(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := []string{"--database-url", url}
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	ctx := t.Context()
	var id, lease int64
	require.NoError(t, conn.QueryRow(ctx, `select queues.enqueue('billing.charge', $1)`,
		`{"customer": "cus_42", "password": "pw_LEAK1", "api_key": "ak_LEAK2",
		  "smtp": {"url": "smtp://mailer:url_LEAK3@mail:587", "Pwd": "pwd_LEAK4"}, "headers": {"X-Api-Key": "xak_LEAK5"}}`).Scan(&id))
	require.NoError(t, conn.QueryRow(ctx,
		`select lease_id from queues.claim_tasks('cli-worker', 10, '1 minute', array['billing.charge'])`).Scan(&lease))
	_, err = conn.Exec(ctx, `select queues.fail_task($1, $2, $3, false, $4)`, id,
		"connect postgres://u:hunter2pw@db/x: refused", lease, `{"token": "ctx_LEAK6", "attempt": 1}`)
	require.NoError(t, err)

	show := run(t, append([]string{"tasks", "show", itoa(id)}, db...)...)
	require.Equal(t, 0, show.code, show.err)
	list := run(t, append([]string{"tasks", "list"}, db...)...)
	require.Equal(t, 0, list.code, list.err)
	showJSON := run(t, append([]string{"tasks", "show", itoa(id), "--json"}, db...)...)
	require.Equal(t, 0, showJSON.code, showJSON.err)
	listJSON := run(t, append([]string{"tasks", "list", "--json"}, db...)...)
	require.Equal(t, 0, listJSON.code, listJSON.err)
	for name, out := range map[string]string{"show": show.out, "list": list.out, "show --json": showJSON.out, "list --json": listJSON.out} {
		require.NotContains(t, out, "LEAK", name)
		require.NotContains(t, out, "hunter2pw", name)
		require.Contains(t, out, "postgres://u:xxxxx@db/x", name)
	}
	for _, out := range []string{show.out, showJSON.out, listJSON.out} {
		require.Contains(t, out, "cus_42")
		require.Contains(t, out, "smtp://mailer:xxxxx@mail:587")
	}
	require.Contains(t, showJSON.out, `"attempt": 1`, "the context's other values stay")
}
