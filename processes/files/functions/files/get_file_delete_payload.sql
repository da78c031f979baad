-- Before handler: resolves the file of one attempt into {bucket, object_key}. The worker asks
-- for a signed DELETE URL for it and sends the DELETE.
create or replace function files.get_file_delete_payload(_payload jsonb) returns jsonb
language plpgsql stable security definer set search_path = pg_catalog, pg_temp
    set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off as $$
declare
    _attempt_id bigint;
    _r record;
begin
    if jsonb_typeof(_payload -> 'file_deletion_attempt_id') is distinct from 'number' then
        return jsonb_build_object('success', false,
            'validation_failure_message', 'get_file_delete_payload: payload needs a numeric file_deletion_attempt_id');
    end if;
    _attempt_id := (_payload ->> 'file_deletion_attempt_id')::bigint;
    select f.file_id, f.bucket, f.object_key into _r
    from files.file_deletion_attempt a
    join files.file_deletion_task t using (file_deletion_task_id)
    join files.file f using (file_id)
    where a.file_deletion_attempt_id = _attempt_id;
    if not found then
        return jsonb_build_object('success', false,
            'validation_failure_message', format('get_file_delete_payload: file_deletion_attempt %s does not exist', _attempt_id));
    end if;
    return jsonb_build_object('success', true, 'payload', jsonb_build_object(
        'bucket', _r.bucket,
        'object_key', _r.object_key,
        'file_id', _r.file_id,
        'file_deletion_attempt_id', _attempt_id));
end $$;
revoke all on function files.get_file_delete_payload(jsonb) from public;
grant execute on function files.get_file_delete_payload(jsonb) to worker_service_user;
