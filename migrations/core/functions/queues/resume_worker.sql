-- Lets a quieted worker claim again, from its next heartbeat; recorded with who did it in
-- queues.worker_event (docs/operations.md, "Quieting a worker"). False when it was not quiet;
-- P0002 when no such worker is registered.
create or replace function queues.resume_worker(_worker_id text, _actor text default null)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _instance text;
    _was boolean;
begin
    _actor := internal.operator_actor('resume_worker', _actor);
    select coalesce(w.instance, '') into _instance from queues.worker w where w.worker_id = _worker_id for no key update;
    if not found then
        raise exception 'resume_worker: worker % is not registered', coalesce(quote_literal(left(_worker_id, 260)), 'NULL')
            using errcode = 'no_data_found';
    end if;
    -- A row of an earlier process under the id is deleted too; it was not this one's.
    delete from queues.worker_quiet q where q.worker_id = _worker_id returning q.instance = _instance into _was;
    if not coalesce(_was, false) then
        return false;
    end if;
    insert into queues.worker_event (worker_id, instance, event, actor) values (_worker_id, nullif(_instance, ''), 'resumed', _actor);
    return true;
end $$;
revoke all on function queues.resume_worker(text, text) from public;
comment on function queues.resume_worker(text, text) is
    'Lets a quieted worker claim again (from its next heartbeat), recording _actor (default: the database role); false when it was not quiet.';
