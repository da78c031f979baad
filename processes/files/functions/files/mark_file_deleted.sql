-- Marks a file logically deleted (the object is gone from storage). Idempotent.
create or replace function files.mark_file_deleted(_file_id bigint) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    update files.file
    set metadata = metadata || jsonb_build_object('deleted', true, 'deleted_at', now())
    where file_id = _file_id and not coalesce((metadata ->> 'deleted')::boolean, false);
$$;
revoke all on function files.mark_file_deleted(bigint) from public;
