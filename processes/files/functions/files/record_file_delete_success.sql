-- Success handler: {original_payload, worker_payload}. The attempt's success fact, and (an
-- attempt that succeeded ends the process) the process's own: no supervisor run is needed.
-- Idempotent. The instance's agenda row is taken first, so a tick deciding the same instance
-- at the same time is waited for, and a terminal fact it recorded is seen.
create or replace function files.record_file_delete_success(_payload jsonb) returns jsonb
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
    set plan_cache_mode = force_custom_plan as $$
declare
    _attempt_id bigint := (_payload #>> '{original_payload,file_deletion_attempt_id}')::bigint;
    _id         bigint;
begin
    select file_deletion_task_id into _id from files.file_deletion_attempt where file_deletion_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('record_file_delete_success: file_deletion_attempt %s does not exist', coalesce(_attempt_id::text, 'NULL')));
    end if;
    delete from files.file_deletion_due where file_deletion_task_id = _id;
    insert into files.file_deletion_attempt_succeeded (file_deletion_attempt_id, provider_response)
    values (_attempt_id, _payload -> 'worker_payload')
    on conflict do nothing;
    if not exists (select 1 from files.file_deletion_task_failed where file_deletion_task_id = _id and run = files.file_deletion_run(_id)) then
        insert into files.file_deletion_task_succeeded (file_deletion_task_id) values (_id) on conflict do nothing;
    end if;
    perform files.mark_file_deleted(t.file_id) from files.file_deletion_task t where t.file_deletion_task_id = _id;
    return jsonb_build_object('success', true);
end $$;
alter function files.record_file_delete_success(jsonb) reset plan_cache_mode;
alter function files.record_file_delete_success(jsonb) set enable_seqscan = off;
alter function files.record_file_delete_success(jsonb) set enable_hashjoin = off;
alter function files.record_file_delete_success(jsonb) set enable_mergejoin = off;
revoke all on function files.record_file_delete_success(jsonb) from public;
grant execute on function files.record_file_delete_success(jsonb) to worker_service_user;
