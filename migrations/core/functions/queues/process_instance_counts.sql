-- Per registered process, how many instances are in each state, each count stopping at _cap
-- (so a large process costs at most _cap rows per state). _states, when given, limits the work
-- to those states; the others answer NULL (the overview counts 'failed' only: telling running
-- from waiting costs a look at the queue per instance). timed_out is the outcome of a wait step
-- whose signal did not come in time (docs/processes.md, "Outcomes"); a process without one
-- counts 0.
create or replace function queues.process_instance_counts(_cap integer default 10000, _states text[] default null)
returns table (process text, title text, running bigint, waiting bigint, succeeded bigint, failed bigint, timed_out bigint)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _p record;
begin
    if _cap is null or _cap < 1 or _cap > 1000000 then
        raise exception 'process_instance_counts: cap must be between 1 and 1000000, got %', coalesce(_cap::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _states is not null and not _states <@ array['running', 'waiting', 'succeeded', 'failed', 'timed_out'] then
        raise exception 'process_instance_counts: states must be among running, waiting, succeeded, failed, timed_out, got %', _states::text
            using errcode = 'invalid_parameter_value';
    end if;
    for _p in select * from queues.process order by process_schema, process_name loop
        process := _p.process;
        title := _p.title;
        execute format($q$
            select case when $2 is null or 'running' = any ($2) then
                       (select count(*) from (select from %1$I.%2$I i where i.state = 'running' limit $1) x) end,
                   case when $2 is null or 'waiting' = any ($2) then
                       (select count(*) from (select from %1$I.%2$I i where i.state = 'waiting' limit $1) x) end,
                   case when $2 is null or 'succeeded' = any ($2) then
                       (select count(*) from (select from %1$I.%2$I i where i.state = 'succeeded' limit $1) x) end,
                   case when $2 is null or 'failed' = any ($2) then
                       (select count(*) from (select from %1$I.%2$I i where i.state = 'failed' limit $1) x) end,
                   case when $2 is null or 'timed_out' = any ($2) then
                       (select count(*) from (select from %1$I.%2$I i where i.state = 'timed_out' limit $1) x) end$q$,
            _p.process_schema, _p.instances_view)
        into running, waiting, succeeded, failed, timed_out
        using _cap, _states;
        return next;
    end loop;
end $$;
revoke all on function queues.process_instance_counts(integer, text[]) from public;
