-- Plans. The functions that run once per attempt (the facts helpers, the before handler, the
-- success and error handlers) plan their statements at every call (plan_cache_mode =
-- force_custom_plan): a plan cached by a worker's session while the attempts table was nearly
-- empty would scan the whole table at every later call (a sequential scan is the cheapest plan
-- for a table of a few pages), and the process would slow down as it grows. Planning these
-- index lookups costs less than such a scan of a few thousand rows.
--
-- The facts helpers: same names, arguments and answers as before.
create or replace function comms.has_send_sms_succeeded_attempt(_send_sms_task_id bigint) returns boolean
language plpgsql stable set search_path = pg_catalog, pg_temp set plan_cache_mode = force_custom_plan as $$
begin
    return exists (select 1 from comms.send_sms_attempt a
                   join comms.send_sms_attempt_succeeded s using (send_sms_attempt_id)
                   where a.send_sms_task_id = _send_sms_task_id);
end $$;
alter function comms.has_send_sms_succeeded_attempt(bigint) reset plan_cache_mode;
alter function comms.has_send_sms_succeeded_attempt(bigint) set enable_seqscan = off;
alter function comms.has_send_sms_succeeded_attempt(bigint) set enable_hashjoin = off;
alter function comms.has_send_sms_succeeded_attempt(bigint) set enable_mergejoin = off;
alter function comms.has_send_sms_succeeded_attempt(bigint) reset plan_cache_mode;
alter function comms.has_send_sms_succeeded_attempt(bigint) set enable_seqscan = off;
alter function comms.has_send_sms_succeeded_attempt(bigint) set enable_hashjoin = off;
alter function comms.has_send_sms_succeeded_attempt(bigint) set enable_mergejoin = off;
revoke all on function comms.has_send_sms_succeeded_attempt(bigint) from public;
