package processtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The worker role may execute the supervisors and handlers and nothing else of the processes;
// PUBLIC may execute nothing; no table is readable by either; every function the worker may run
// is SECURITY DEFINER with a fixed search_path.
func TestProcessGrants(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)

	granted := scalar[[]string](t, pool, `
		select coalesce(array_agg(p.oid::regprocedure::text order by p.oid::regprocedure::text), '{}')
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		where n.nspname in ('comms', 'files', 'accounts', 'api')
		  and has_function_privilege('worker_service_user', p.oid, 'execute')`)
	require.ElementsMatch(t, []string{
		"accounts.account_anonymization_supervisor(jsonb)",
		"accounts.account_deletion_supervisor(jsonb)",
		"comms.get_email_payload(jsonb)",
		"comms.get_sms_payload(jsonb)",
		"comms.record_email_delivery(text,text,text,jsonb)",
		"comms.record_email_failure(jsonb)",
		"comms.record_email_success(jsonb)",
		"comms.record_sms_delivery(text,text,text,text,jsonb)",
		"comms.record_sms_failure(jsonb)",
		"comms.record_sms_success(jsonb)",
		"comms.record_webhook_refusal(text,text,jsonb)",
		"comms.send_email_supervisor(jsonb)",
		"comms.send_sms_supervisor(jsonb)",
		"files.file_deletion_supervisor(jsonb)",
		"files.get_file_delete_payload(jsonb)",
		"files.record_file_delete_failure(jsonb)",
		"files.record_file_delete_success(jsonb)",
	}, granted)

	require.Empty(t, scalar[[]string](t, pool, `
		select coalesce(array_agg(p.oid::regprocedure::text), '{}')
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		where n.nspname in ('comms', 'files', 'accounts', 'api')
		  and (p.proacl is null or exists (select 1 from aclexplode(p.proacl) a where a.grantee = 0 and a.privilege_type = 'EXECUTE'))`),
		"functions executable by PUBLIC")

	require.Empty(t, scalar[[]string](t, pool, `
		select coalesce(array_agg(p.oid::regprocedure::text), '{}')
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		where n.nspname in ('comms', 'files', 'accounts', 'api')
		  and has_function_privilege('worker_service_user', p.oid, 'execute')
		  and not (p.prosecdef and exists (select 1 from unnest(p.proconfig) c where c like 'search_path=%'))`),
		"granted functions that are not security definer with a fixed search_path")

	require.Empty(t, scalar[[]string](t, pool, `
		select coalesce(array_agg(c.oid::regclass::text), '{}')
		from pg_class c join pg_namespace n on n.oid = c.relnamespace
		where n.nspname in ('comms', 'files', 'accounts', 'api') and c.relkind in ('r', 'v', 'm', 'p')
		  and (has_table_privilege('worker_service_user', c.oid, 'select, insert, update, delete')
		       or exists (select 1 from aclexplode(c.relacl) a where a.grantee = 0))`),
		"tables the worker or PUBLIC can touch")
}
