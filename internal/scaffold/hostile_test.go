package scaffold_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/scaffold"
)

// A scaffolded process keeps the trust boundary of the shipped ones (docs/security.md, "Who may
// name a function"): an application role granted enqueueing and the process's kickoff starts it,
// but a task naming the process's supervisor or handlers, which the worker may run, is refused
// (42501) however it is enqueued, and no fact is written until the worker runs the real process.
func TestGeneratedProcessFactsUnforgeable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := scaffold.Process{Name: "send_reminder", Schema: "crm", Key: "customer_id", Channel: taskorch.TypeEmail, MaxAttempts: 2}
	pool := apply(t, p)

	b := make([]byte, 5)
	_, err := rand.Read(b)
	require.NoError(t, err)
	app := pgx.Identifier{"app_" + hex.EncodeToString(b)}.Sanitize()
	_, err = pool.Exec(ctx, fmt.Sprintf(`create role %[1]s nologin;
		select queues.grant_enqueue('%[1]s');
		grant usage on schema crm to %[1]s;
		grant execute on function crm.kickoff_send_reminder(bigint, timestamptz) to %[1]s`, app))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), fmt.Sprintf(`drop owned by %[1]s; drop role %[1]s`, app))
	})

	workerFns := scalar[[]string](t, pool, `
		select array_agg(format('%s.%s', n.nspname, p.proname) order by 1)
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		where n.nspname = 'crm' and has_function_privilege('worker_service_user', p.oid, 'execute')`)
	require.Len(t, workerFns, 4, "the supervisor and three handlers")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "set local role "+app)
	require.NoError(t, err)
	forged := `{"send_reminder_task_id": 1, "send_reminder_attempt_id": 1, "customer_id": 42,
		"original_payload": {"send_reminder_attempt_id": 1}, "worker_payload": {"id": "forged"}}`
	for _, fn := range workerFns {
		for _, sql := range []string{
			`select queues.enqueue('db_function', $1::jsonb || jsonb_build_object('db_function', $2::text))`,
			`select queues.enqueue_many(array['email'], array[$1::jsonb || jsonb_build_object('success_handler', $2::text)])`,
			`select * from queues.enqueue_debounced('email', $1::jsonb || jsonb_build_object('error_handler', $2::text), 'k', '0')`,
			`select * from queues.insert_task('email', $1::jsonb || jsonb_build_object('before_handler', $2::text))`,
		} {
			_, err := tx.Exec(ctx, "savepoint s")
			require.NoError(t, err)
			_, err = tx.Exec(ctx, sql, forged, fn)
			var pe *pgconn.PgError
			require.ErrorAs(t, err, &pe, fn+": "+sql)
			require.Equal(t, "42501", pe.Code, "%s: %s: %s", fn, sql, pe.Message)
			_, err = tx.Exec(ctx, "rollback to savepoint s")
			require.NoError(t, err)
		}
	}
	var id int64
	require.NoError(t, tx.QueryRow(ctx, `select send_reminder_task_id from crm.kickoff_send_reminder(42)`).Scan(&id))
	require.NoError(t, tx.Commit(ctx))
	require.Zero(t, scalar[int64](t, pool, `select count(*) from crm.send_reminder_attempt_succeeded`))

	run(t, pool, map[string]taskorch.ChannelProvider{taskorch.TypeEmail: taskorch.ChannelProviderFunc(
		func(context.Context, taskorch.ChannelCall) (json.RawMessage, error) {
			return json.RawMessage(`{"id":"m-1"}`), nil
		})})
	waitTrue(t, pool, "the kickoff's process succeeds",
		`select exists (select 1 from crm.send_reminder_task_succeeded where send_reminder_task_id = $1)`, id)
	require.Equal(t, int64(1), scalar[int64](t, pool, `select count(*) from crm.send_reminder_attempt_succeeded`),
		"one success fact, the real attempt's")
}
