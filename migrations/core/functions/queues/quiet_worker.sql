-- Quiets a worker: its process finishes the tasks it runs and claims nothing more, from its next
-- heartbeat; recorded with who did it in queues.worker_event (docs/operations.md, "Quieting a
-- worker"). False when it was quiet already; P0002 when no such worker is registered.
create or replace function queues.quiet_worker(_worker_id text, _actor text default null)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _instance text;
begin
    _actor := internal.operator_actor('quiet_worker', _actor);
    select coalesce(w.instance, '') into _instance from queues.worker w where w.worker_id = _worker_id for no key update;
    if not found then
        raise exception 'quiet_worker: worker % is not registered', coalesce(quote_literal(left(_worker_id, 260)), 'NULL')
            using errcode = 'no_data_found';
    end if;
    if exists (select 1 from queues.worker_quiet q where q.worker_id = _worker_id and q.instance = _instance) then
        return false;
    end if;
    insert into queues.worker_quiet (worker_id, instance, actor) values (_worker_id, _instance, _actor)
    on conflict (worker_id) do update set instance = excluded.instance, quiet_since = excluded.quiet_since, actor = excluded.actor;
    insert into queues.worker_event (worker_id, instance, event, actor) values (_worker_id, nullif(_instance, ''), 'quieted', _actor);
    return true;
end $$;
revoke all on function queues.quiet_worker(text, text) from public;
comment on function queues.quiet_worker(text, text) is
    'Tells the registered process of worker _worker_id to finish what it runs and claim nothing more (from its next heartbeat), recording _actor (default: the database role); false when it was quiet already. A process restarted under the same id is not quiet.';
