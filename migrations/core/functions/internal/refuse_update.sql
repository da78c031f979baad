-- History is append-only: updates are refused outright. (Deletes are left to retention, which
-- prunes a finished task together with its history.)
create or replace function internal.refuse_update() returns trigger
language plpgsql as $$
begin
    raise exception 'queues.% is append-only: rows are never updated', tg_table_name
        using errcode = 'insufficient_privilege';
end $$;
revoke all on function internal.refuse_update() from public;
