-- Building blocks shared by supervisor-driven processes (seed 002 "Supervisor building blocks"):
-- the shipped ones (comms, files, accounts) and those `taskorch scaffold process` writes.

-- Facts (*_attempt_succeeded, *_attempt_failed, *_task_succeeded, *_task_failed) are
-- append-only. A process attaches this to each fact table:
--     create trigger foo_attempt_failed_append_only before update on domain.foo_attempt_failed
--         for each statement execute function internal.refuse_fact_update();
create function internal.refuse_fact_update() returns trigger
language plpgsql as $$
begin
    raise exception '%.% holds facts, which are append-only: rows are never updated', tg_table_schema, tg_table_name
        using errcode = 'insufficient_privilege';
end $$;

-- The wait before the next attempt after _failures failed ones: none before the first failure,
-- then _base, doubled per further failure, capped at _max. Deterministic, so a supervisor that
-- runs twice computes the same time.
create function queues.process_backoff(_failures integer, _base interval, _max interval) returns interval
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select case
        when coalesce(_failures, 0) <= 0 then interval '0'
        when _failures >= 31 then _max
        else least(_max, _base * power(2, _failures - 1)::double precision)
    end
$$;

revoke all on function internal.refuse_fact_update(), queues.process_backoff(integer, interval, interval) from public;
