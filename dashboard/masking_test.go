package dashboard_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A task page masks every secret of its payload (keys of every spelling, at any depth, and a
// URL password inside a string), of its error message and of its error context; the lists
// mask the last error too. What is not a secret still shows.
func TestTaskPageMasksSecrets(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	ctx := t.Context()
	var id, lease int64
	require.NoError(t, pool.QueryRow(ctx, `select queues.enqueue('masking.probe', $1)`,
		`{"customer": "cus_42", "headers": {"X-Api-Key": "xak_LEAK1", "Accept": "text/plain"},
		  "db": {"pwd": "pwd_LEAK2", "dsn": "postgres://app:dsn_LEAK3@db:5432/x"},
		  "list": [{"Client_Secret": "cs_LEAK4"}], "note": "connect with password=kv_LEAK5",
		  "Authorization": "Bearer auth_LEAK6"}`).Scan(&id))
	require.NoError(t, pool.QueryRow(ctx,
		`select lease_id from queues.claim_tasks('masking-worker', 10, '1 minute', array['masking.probe'])`).Scan(&lease))
	_, err := pool.Exec(ctx, `select queues.fail_task($1, $2, $3, false, $4)`, id,
		"handler: connect postgres://u:hunter2pw@db/x refused; X-Api-Key: hdr_LEAK7", lease,
		`{"request": {"url": "https://api.example.com/v1", "api_key": "ctx_LEAK8"}, "dsn": "redis://:ctx_LEAK9@r:6379/0"}`)
	require.NoError(t, err)

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken})
	require.NoError(t, err)
	srv := newServer(t, h)
	c := browserlessClient(t)
	for _, p := range []string{"/tasks/" + itoa(id), "/tasks?type=masking.probe", "/dead?status=failed"} {
		code, body, _ := get(t, c, srv.URL+p, bearer()...)
		require.Equal(t, http.StatusOK, code, p)
		for _, leak := range []string{"LEAK", "hunter2pw"} {
			require.NotContains(t, body, leak, p)
		}
	}
	_, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(id), bearer()...)
	for _, shown := range []string{"cus_42", "text/plain", "postgres://app:xxxxx@db:5432/x", "postgres://u:xxxxx@db/x",
		"password=xxxxx", "https://api.example.com/v1", "redis://:xxxxx@r:6379/0", `&#34;xxxxx&#34;`} {
		require.Contains(t, body, shown)
	}
}
