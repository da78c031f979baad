-- The instances of every registered process (or of _process, 'schema.name'), newest first
-- (each process's newest _limit, then the newest _limit of those). _state filters by state.
-- Views and names come from the registry, quoted with format('%I.%I'); input is only ever a
-- bound parameter. Bad input raises invalid_parameter_value.
create or replace function queues.process_instances(_state text default null, _limit integer default 100, _process text default null)
returns table (process text, instance_id bigint, state text, wait_until timestamptz, attempts integer,
               started_at timestamptz, ended_at timestamptz, error text, parent_process text, parent_id bigint)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _sql text;
begin
    if _state is not null and _state not in ('running', 'waiting', 'succeeded', 'failed', 'timed_out') then
        raise exception 'process_instances: state must be running, waiting, succeeded, failed or timed_out, got %', quote_literal(left(_state, 40))
            using errcode = 'invalid_parameter_value';
    end if;
    if _limit is null or _limit < 1 or _limit > 10000 then
        raise exception 'process_instances: limit must be between 1 and 10000, got %', coalesce(_limit::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _process is not null and not exists (select 1 from queues.process p where p.process = _process) then
        raise exception 'process_instances: unknown process %; registered: %', quote_literal(left(_process, 120)),
            coalesce((select string_agg(p.process, ', ' order by p.process) from queues.process p), 'none')
            using errcode = 'invalid_parameter_value';
    end if;
    select string_agg(format(
        '(select %L::text, i.instance_id, i.state, i.wait_until, i.attempts, i.started_at, i.ended_at, i.error, i.parent_process, i.parent_id from %I.%I i%s order by i.instance_id desc limit $2)',
        p.process, p.process_schema, p.instances_view, case when _state is null then '' else ' where i.state = $1' end),
        ' union all ' order by p.process)
    into _sql
    from queues.process p
    where _process is null or p.process = _process;
    if _sql is null then
        return;
    end if;
    return query execute 'select * from (' || _sql || ') x order by x.started_at desc, 1, x.instance_id desc limit $2'
        using _state, _limit;
end $$;
revoke all on function queues.process_instances(text, integer, text) from public;
