-- Facts (*_attempt_succeeded, *_attempt_failed, *_task_succeeded, *_task_failed) are
-- append-only. A process attaches this to each fact table:
--     create trigger foo_attempt_failed_append_only before update on domain.foo_attempt_failed
--         for each statement execute function internal.refuse_fact_update();
create or replace function internal.refuse_fact_update() returns trigger
language plpgsql as $$
begin
    raise exception '%.% holds facts, which are append-only: rows are never updated', tg_table_schema, tg_table_name
        using errcode = 'insufficient_privilege';
end $$;
revoke all on function internal.refuse_fact_update() from public;
