-- When an accounts.account_anonymization instance waits until: NULL while an attempt is outstanding
-- (its task is queued or running) or a supervisor run is due or running; else the next
-- supervisor run, scheduled in the future (queues.process_next_run). The one place that decides
-- 'waiting'.
create or replace function accounts.account_anonymization_wait_until(_account_anonymization_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case
        when exists (select 1 from accounts.account_anonymization_attempt a
                     where a.account_anonymization_task_id = _account_anonymization_task_id
                       and not exists (select 1 from accounts.account_anonymization_attempt_succeeded s where s.account_anonymization_attempt_id = a.account_anonymization_attempt_id)
                       and not exists (select 1 from accounts.account_anonymization_attempt_failed f where f.account_anonymization_attempt_id = a.account_anonymization_attempt_id))
        then null
        else queues.process_next_run('accounts.account_anonymization_supervisor', _account_anonymization_task_id)
    end
$$;
revoke all on function accounts.account_anonymization_wait_until(bigint) from public;
