-- Processes you can see (docs/processes.md, "Seeing processes"; docs/sql.md, "Process instances").
--
--   queues.process                          the registry: one row per business process
--   queues.register_process(schema, name, title, description)
--                                           a process's migration registers it (after creating
--                                           its <schema>.<name>_instances view)
--   queues.process_next_run(fn, id)         facts helper: when the next supervisor run of an
--                                           instance is due, NULL when one is due or running now
--   queues.process_instances(state, limit, process)
--                                           every registered process's instances, newest first
--   queues.process_instance_counts(cap, states)
--                                           per process: running, waiting, succeeded, failed
--
-- Every process has a view <schema>.<name>_instances with the columns
--   instance_id bigint, state text ('running' | 'waiting' | 'succeeded' | 'failed'),
--   wait_until timestamptz, attempts integer, started_at timestamptz, ended_at timestamptz,
--   error text, parent_process text, parent_id bigint
-- A terminal fact decides succeeded or failed; otherwise the process is 'waiting' when the next
-- thing that will happen is a run scheduled in the future (<schema>.<name>_wait_until, one small
-- function per process), else 'running'. The views are unions of one branch per state, so a
-- filter on state reads only that state's facts (listing failed instances reads the
-- *_task_failed table, not every root).

-- The instance a supervisor task works on: {"db_function": "<schema>.<name>_supervisor",
-- "<name>_task_id": id} -> id. NULL for any other payload. Immutable (it reads only its
-- argument), so it can be indexed.
create function internal.process_instance_id(_payload jsonb) returns bigint
language sql immutable parallel safe
return case
    when (_payload ->> (pg_catalog.substring(_payload ->> 'db_function',
                                             '^[a-z_][a-z0-9_$]*\.([a-z_][a-z0-9_$]*)_supervisor$') || '_task_id'))
         operator(pg_catalog.~) '^[0-9]{1,18}$'
    then (_payload ->> (pg_catalog.substring(_payload ->> 'db_function',
                                             '^[a-z_][a-z0-9_$]*\.([a-z_][a-z0-9_$]*)_supervisor$') || '_task_id'))::bigint
end;

-- "Is a run of this instance's supervisor due, running or scheduled?" is an index range: only
-- pending and running db_function tasks are in it.
create index task_process_instance_idx on queues.task
    ((payload ->> 'db_function'), internal.process_instance_id(payload), run_at)
    where task_type = 'db_function' and status in ('pending', 'running');

create table queues.process (
    process_schema text not null,
    process_name   text not null,
    process        text generated always as (process_schema || '.' || process_name) stored,
    title          text not null,
    description    text,
    root_table     text not null,   -- <process_name>_task, in process_schema
    instances_view text not null,   -- <process_name>_instances, in process_schema
    registered_at  timestamptz not null default now(),
    primary key (process_schema, process_name),
    constraint process_schema_valid check (process_schema ~ '^[a-z_][a-z0-9_]*$' and length(process_schema) <= 63),
    constraint process_name_valid check (process_name ~ '^[a-z_][a-z0-9_]*$' and length(process_name) <= 50),
    constraint process_title_valid check (length(btrim(title)) between 1 and 200)
);
comment on table queues.process is
    'The registry of business processes: written by queues.register_process from each process''s migration; read by queues.process_instances.';

-- Registers (or updates the title of) a process. Its root table <schema>.<name>_task and its
-- view <schema>.<name>_instances must exist, the view with the columns every instances view has.
-- Bad input raises invalid_parameter_value naming the problem; nothing is written then.
create function queues.register_process(_schema text, _name text, _title text, _description text default null)
returns void
language plpgsql volatile set search_path = pg_catalog, pg_temp as $$
declare
    _view    regclass;
    _missing text;
begin
    if _schema is null or _schema !~ '^[a-z_][a-z0-9_]*$' or length(_schema) > 63 then
        raise exception 'register_process: schema must be a lowercase SQL identifier, got %', coalesce(quote_literal(left(_schema, 80)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _name is null or _name !~ '^[a-z_][a-z0-9_]*$' or length(_name) > 50 then
        raise exception 'register_process: name must be a lowercase SQL identifier of at most 50 characters, got %', coalesce(quote_literal(left(_name, 80)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _title is null or length(btrim(_title)) not between 1 and 200 then
        raise exception 'register_process: title must be 1 to 200 characters' using errcode = 'invalid_parameter_value';
    end if;
    if to_regclass(format('%I.%I', _schema, _name || '_task')) is null then
        raise exception 'register_process: %.% has no root table %.%_task', _schema, _name, _schema, _name
            using errcode = 'invalid_parameter_value';
    end if;
    _view := to_regclass(format('%I.%I', _schema, _name || '_instances'));
    if _view is null then
        raise exception 'register_process: create the view %.%_instances first (docs/processes.md, "Seeing processes")', _schema, _name
            using errcode = 'invalid_parameter_value';
    end if;
    select string_agg(format('%s %s', w.col, w.typ), ', ' order by w.ord) into _missing
    from (values (1, 'instance_id', 'bigint'), (2, 'state', 'text'), (3, 'wait_until', 'timestamp with time zone'),
                 (4, 'attempts', 'integer'), (5, 'started_at', 'timestamp with time zone'),
                 (6, 'ended_at', 'timestamp with time zone'), (7, 'error', 'text'),
                 (8, 'parent_process', 'text'), (9, 'parent_id', 'bigint')) w(ord, col, typ)
    where not exists (select 1 from pg_attribute a
                      where a.attrelid = _view and a.attname = w.col and a.attnum > 0 and not a.attisdropped
                        and format_type(a.atttypid, a.atttypmod) = w.typ);
    if _missing is not null then
        raise exception 'register_process: the view %.%_instances lacks the columns (or types) %', _schema, _name, _missing
            using errcode = 'invalid_parameter_value';
    end if;
    insert into queues.process (process_schema, process_name, title, description, root_table, instances_view)
    values (_schema, _name, btrim(_title), _description, _name || '_task', _name || '_instances')
    on conflict (process_schema, process_name) do update
        set title = excluded.title, description = excluded.description;
end $$;

-- When the next supervisor run of an instance will happen: the earliest pending db_function
-- task naming <_db_function> and the instance, when it is in the future. NULL when a run is due
-- now or running (the instance is being worked on) or none is scheduled.
create function queues.process_next_run(_db_function text, _instance_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case when bool_or(t.status = 'running' or t.run_at <= now()) then null else min(t.run_at) end
    from queues.task t
    where t.task_type = 'db_function' and t.status in ('pending', 'running')
      and t.payload ->> 'db_function' = _db_function
      and internal.process_instance_id(t.payload) = _instance_id
$$;

-- The instances of every registered process (or of _process, 'schema.name'), newest first
-- (each process's newest _limit, then the newest _limit of those). _state filters by state.
-- Views and names come from the registry, quoted with format('%I.%I'); input is only ever a
-- bound parameter. Bad input raises invalid_parameter_value.
create function queues.process_instances(_state text default null, _limit integer default 100, _process text default null)
returns table (process text, instance_id bigint, state text, wait_until timestamptz, attempts integer,
               started_at timestamptz, ended_at timestamptz, error text, parent_process text, parent_id bigint)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _sql text;
begin
    if _state is not null and _state not in ('running', 'waiting', 'succeeded', 'failed') then
        raise exception 'process_instances: state must be running, waiting, succeeded or failed, got %', quote_literal(left(_state, 40))
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

-- Per registered process, how many instances are in each state, each count stopping at _cap
-- (so a large process costs at most _cap rows per state). _states, when given, limits the work
-- to those states; the others answer NULL (the overview counts 'failed' only: telling running
-- from waiting costs a look at the queue per instance).
create function queues.process_instance_counts(_cap integer default 10000, _states text[] default null)
returns table (process text, title text, running bigint, waiting bigint, succeeded bigint, failed bigint)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _p record;
begin
    if _cap is null or _cap < 1 or _cap > 1000000 then
        raise exception 'process_instance_counts: cap must be between 1 and 1000000, got %', coalesce(_cap::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _states is not null and not _states <@ array['running', 'waiting', 'succeeded', 'failed'] then
        raise exception 'process_instance_counts: states must be among running, waiting, succeeded, failed, got %', _states::text
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
                       (select count(*) from (select from %1$I.%2$I i where i.state = 'failed' limit $1) x) end$q$,
            _p.process_schema, _p.instances_view)
        into running, waiting, succeeded, failed
        using _cap, _states;
        return next;
    end loop;
end $$;

-- Grants: nothing for PUBLIC, nothing for the worker. The dashboard and the CLI read as the
-- schema's owner; grant execute on process_instances and process_instance_counts (and select on
-- queues.process) to an operator's role to delegate them (docs/security.md).
revoke all on table queues.process from public;
revoke all on function
    internal.process_instance_id(jsonb),
    queues.register_process(text, text, text, text),
    queues.process_next_run(text, bigint),
    queues.process_instances(text, integer, text),
    queues.process_instance_counts(integer, text[])
from public;
