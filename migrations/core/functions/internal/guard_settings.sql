-- Keeps the row: stamps updates, refuses DELETE and TRUNCATE (the readers need the row).
create or replace function internal.guard_settings() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    if tg_op = 'UPDATE' then
        new.updated_at := now();
        new.updated_by := session_user;
        return new;
    end if;
    raise exception 'queues.settings holds one row, which is updated, never deleted'
        using errcode = 'insufficient_privilege';
end $$;
revoke all on function internal.guard_settings() from public;
