-- What the leader samples for the alerts beside queues.queue_stats() (docs/operations.md,
-- "Metrics and alerts"), as (metric, label, value) rows:
--   'queue_paused', task type, 1     one row per paused queue (queues.queue_pause)
--   'default_partition_rows', '', n  the rows of queues.task_event_default, the history's
--                                    catch-all partition, which stays empty while the leader
--                                    makes each day's partition ahead (counted up to 10000)
--   'processes_failed', process, n   per registered process, its instances that failed within
--                                    _window (ended_at), counted up to _cap
-- Bad input raises invalid_parameter_value.
create or replace function queues.health_stats(_window interval default interval '1 hour', _cap integer default 10000)
returns table (metric text, label text, value bigint)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _p record;
begin
    if _window is null or _window <= interval '0' or _window > interval '7 days' then
        raise exception 'health_stats: _window must be between 0 and 7 days, got %', coalesce(_window::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _cap is null or _cap < 1 or _cap > 1000000 then
        raise exception 'health_stats: _cap must be between 1 and 1000000, got %', coalesce(_cap::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    return query select 'queue_paused'::text, qp.task_type, 1::bigint from queues.queue_pause qp;
    return query select 'default_partition_rows'::text, ''::text,
        (select count(*) from (select from queues.task_event_default limit 10000) x);
    for _p in select * from queues.process order by process loop
        metric := 'processes_failed';
        label := _p.process;
        execute format($q$select count(*) from (select from %1$I.%2$I i
                           where i.state = 'failed' and i.ended_at > now() - $1 limit $2) x$q$,
            _p.process_schema, _p.instances_view)
        into value
        using _window, _cap;
        return next;
    end loop;
end $$;
revoke all on function queues.health_stats(interval, integer) from public;
grant execute on function queues.health_stats(interval, integer) to worker_service_user;
comment on function queues.health_stats(interval, integer) is 'What the leader samples for the alerts: the paused queues, the rows of the history''s default partition, and per process its instances failed within _window.';
