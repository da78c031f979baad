-- The current run of an instance: 1, or the run its last restart started. PL/pgSQL, so its plan
-- is cached: handlers call it once per attempt and the supervisor once per instance (an SQL
-- function with a SET clause is planned at every call).
create or replace function comms.send_sms_run(_send_sms_task_id bigint) returns integer
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
begin
    return (select coalesce(max(r.run), 1) from comms.send_sms_task_restarted r where r.send_sms_task_id = _send_sms_task_id);
end $$;
alter function comms.send_sms_run(bigint) reset plan_cache_mode;
alter function comms.send_sms_run(bigint) set enable_seqscan = off;
alter function comms.send_sms_run(bigint) set enable_hashjoin = off;
alter function comms.send_sms_run(bigint) set enable_mergejoin = off;
alter function comms.send_sms_run(bigint) reset plan_cache_mode;
alter function comms.send_sms_run(bigint) set enable_seqscan = off;
alter function comms.send_sms_run(bigint) set enable_hashjoin = off;
alter function comms.send_sms_run(bigint) set enable_mergejoin = off;
revoke all on function comms.send_sms_run(bigint) from public;
