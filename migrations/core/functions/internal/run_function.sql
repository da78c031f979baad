-- The same function, the same refusals in the same order as before; its checks now live in
-- internal.runnable_function.
create or replace function internal.run_function(function_name text, payload jsonb) returns jsonb
language plpgsql volatile security invoker set search_path = pg_catalog, pg_temp as $fn$
declare
    _result jsonb;
begin
    execute format('select %s($1)', internal.runnable_function(function_name, payload)) using payload into _result;
    return _result;
end $fn$;
revoke all on function internal.run_function(text, jsonb) from public;
grant execute on function internal.run_function(text, jsonb) to worker_service_user;
comment on function internal.run_function(text, jsonb) is 'Calls schema.name(jsonb) returns jsonb with the payload, as the caller (security invoker). Names are resolved safely; see docs/security.md.';
