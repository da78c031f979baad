-- Registers (or updates the title of) a process. Its root table <schema>.<name>_task and its
-- view <schema>.<name>_instances must exist, the view with the columns every instances view has.
-- Bad input raises invalid_parameter_value naming the problem; nothing is written then.
create or replace function queues.register_process(_schema text, _name text, _title text, _description text default null)
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
revoke all on function queues.register_process(text, text, text, text) from public;
