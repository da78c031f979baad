-- Restarts failed anonymization _id (run n+1) for _reason and runs its supervisor now, so it
-- makes a new attempt with a new attempt budget. Raises, writing nothing, when the reason is
-- empty or over 2000 characters (invalid_parameter_value), the instance does not exist
-- (no_data_found), or it is not failed (object_not_in_prerequisite_state). The root row's lock
-- orders two retries at once; the second finds the instance running. Called through
-- queues.retry_process, and by accounts.retry_account_deletion. It does not restart the
-- account deletion that failed on it: retry that one (it then waits for this run).
create or replace function accounts.retry_account_anonymization(_account_anonymization_task_id bigint, _reason text) returns integer
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _run  integer;
    _last bigint;
begin
    if _reason is null or btrim(_reason) = '' then
        raise exception 'retry_account_anonymization: a reason is required (it is recorded with the restart)'
            using errcode = 'invalid_parameter_value';
    end if;
    if length(btrim(_reason)) > 2000 then
        raise exception 'retry_account_anonymization: the reason must be at most 2000 characters, got %', length(btrim(_reason))
            using errcode = 'invalid_parameter_value';
    end if;
    perform 1 from accounts.account_anonymization_task where account_anonymization_task_id = _account_anonymization_task_id for update;
    if not found then
        raise exception 'retry_account_anonymization: accounts.account_anonymization has no instance %', coalesce(_account_anonymization_task_id::text, 'NULL')
            using errcode = 'no_data_found';
    end if;
    if exists (select 1 from accounts.account_anonymization_task_succeeded where account_anonymization_task_id = _account_anonymization_task_id) then
        raise exception 'retry_account_anonymization: accounts.account_anonymization % succeeded; only a failed instance can be retried', _account_anonymization_task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    _run := accounts.account_anonymization_run(_account_anonymization_task_id);
    if not exists (select 1 from accounts.account_anonymization_task_failed
                   where account_anonymization_task_id = _account_anonymization_task_id and run = _run) then
        raise exception 'retry_account_anonymization: accounts.account_anonymization % is running, not failed; only a failed instance can be retried', _account_anonymization_task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    select max(account_anonymization_attempt_id) into _last from accounts.account_anonymization_attempt
    where account_anonymization_task_id = _account_anonymization_task_id;
    insert into accounts.account_anonymization_task_restarted (account_anonymization_task_id, run, reason, last_attempt_id)
    values (_account_anonymization_task_id, _run + 1, btrim(_reason), _last);
    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_anonymization_supervisor',
                           'account_anonymization_task_id', _account_anonymization_task_id));
    return _run + 1;
end $$;
revoke all on function accounts.retry_account_anonymization(bigint, text) from public;
