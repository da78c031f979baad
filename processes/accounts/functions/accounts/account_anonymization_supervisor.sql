-- The anonymization's supervisor, run-aware: a failed fact of an earlier run is not terminal; the
-- attempt budget, the backoff and the give-up message count the current run's attempts only.
create or replace function accounts.account_anonymization_supervisor(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id         bigint;
    _task       accounts.account_anonymization_task;
    _cfg        accounts.process_config;
    _since      bigint;
    _failures   integer;
    _last_fail  timestamptz;
    _next_try   timestamptz;
    _attempt_id bigint;
    _err        text;
begin
    if jsonb_typeof(_payload -> 'account_anonymization_task_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'account_anonymization_supervisor: payload needs a numeric account_anonymization_task_id');
    end if;
    _id := (_payload ->> 'account_anonymization_task_id')::bigint;
    select * into _task from accounts.account_anonymization_task where account_anonymization_task_id = _id for update;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('account_anonymization_supervisor: account_anonymization_task %s does not exist', _id));
    end if;
    if exists (select 1 from accounts.account_anonymization_task_succeeded where account_anonymization_task_id = _id)
       or exists (select 1 from accounts.account_anonymization_task_failed
                  where account_anonymization_task_id = _id and run = accounts.account_anonymization_run(_id)) then
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'terminal'));
    end if;
    select * into _cfg from accounts.process_config where process = 'account_anonymization';
    -- The current run's attempts are those after the last restart's last_attempt_id.
    _since := coalesce((select max(z.last_attempt_id) from accounts.account_anonymization_task_restarted z
                        where z.account_anonymization_task_id = _id), 0);

    if accounts.has_account_anonymization_succeeded_attempt(_id) then
        insert into accounts.account_anonymization_task_succeeded (account_anonymization_task_id) values (_id) on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'anonymized'));
    end if;
    _failures := accounts.count_account_anonymization_failed_attempts(_id);
    if accounts.is_account_anonymization_stuck(_task.account_id) then
        insert into accounts.account_anonymization_task_failed (account_anonymization_task_id, error_message)
        values (_id, format('account %s not anonymized after %s failed attempts (max %s); last error: %s',
                            _task.account_id, _failures, _cfg.max_attempts,
                            coalesce((select f.error_message from accounts.account_anonymization_attempt a
                                      join accounts.account_anonymization_attempt_failed f using (account_anonymization_attempt_id)
                                      where a.account_anonymization_task_id = _id and a.account_anonymization_attempt_id > _since
                                      order by f.created_at desc, f.account_anonymization_attempt_id desc limit 1), 'none')))
        on conflict do nothing;
        return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object('state', 'gave_up'));
    end if;

    select max(f.created_at) into _last_fail from accounts.account_anonymization_attempt a
    join accounts.account_anonymization_attempt_failed f using (account_anonymization_attempt_id)
    where a.account_anonymization_task_id = _id and a.account_anonymization_attempt_id > _since;
    _next_try := coalesce(_last_fail, '-infinity') + queues.process_backoff(_failures, _cfg.backoff_base, _cfg.backoff_max);

    if _next_try <= now() then
        insert into accounts.account_anonymization_attempt (account_anonymization_task_id) values (_id)
        returning account_anonymization_attempt_id into _attempt_id;
        begin
            perform accounts.anonymize_account(_task.account_id);
            insert into accounts.account_anonymization_attempt_succeeded (account_anonymization_attempt_id) values (_attempt_id);
        exception when others then
            get stacked diagnostics _err = message_text;
            insert into accounts.account_anonymization_attempt_failed (account_anonymization_attempt_id, error_message)
            values (_attempt_id, left(_err, 8192));
        end;
        -- Look again at once: the next run records the terminal fact or backs off.
        _next_try := now();
    end if;

    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_anonymization_supervisor', 'account_anonymization_task_id', _id),
        _next_try);
    return jsonb_build_object('status', 'succeeded', 'payload', jsonb_build_object(
        'state', 'in_progress', 'attempt_id', _attempt_id, 'failures', _failures, 'next_check_at', _next_try));
end $$;
revoke all on function accounts.account_anonymization_supervisor(jsonb) from public;
grant execute on function accounts.account_anonymization_supervisor(jsonb) to worker_service_user;
