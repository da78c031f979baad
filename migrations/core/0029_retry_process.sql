-- Retry a failed process by hand (docs/processes.md, "Retrying a failed process"; docs/sql.md,
-- "Process instances").
--
--   queues.process.retry_function             the process's retry function, in its schema
--   queues.register_process_retry(schema, name, function)
--                                             a process's migration registers it
--   queues.retry_process(process, id, reason) restarts a failed instance: a restart fact with
--                                             the reason, new attempts from the next tick
--
-- The work is the process's own (<schema>.retry_<name>(id bigint, reason text) returns integer,
-- the run it started: the kit renders it, internal/scaffold/channel_retry.sql.tmpl); this file
-- finds it in the registry and calls it. Names come from the registry only, quoted with
-- format('%I.%I'); the caller's input is only ever a bound parameter.

alter table queues.process add column retry_function text
    constraint process_retry_function_valid check (retry_function ~ '^[a-z_][a-z0-9_]*$' and length(retry_function) <= 63);

-- Registers _function, a function <_schema>._function(bigint, text) returning integer, as the
-- way to retry an instance of the registered process <_schema>.<_name>. Bad input raises
-- invalid_parameter_value naming the problem; nothing is written then.
create function queues.register_process_retry(_schema text, _name text, _function text) returns void
language plpgsql volatile set search_path = pg_catalog, pg_temp as $$
declare
    _fn regprocedure;
begin
    if not exists (select 1 from queues.process p where p.process_schema = _schema and p.process_name = _name) then
        raise exception 'register_process_retry: %.% is not a registered process (queues.register_process first)',
            coalesce(left(_schema, 80), 'NULL'), coalesce(left(_name, 80), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _function is null or _function !~ '^[a-z_][a-z0-9_]*$' or length(_function) > 63 then
        raise exception 'register_process_retry: function must be a lowercase SQL identifier, got %', coalesce(quote_literal(left(_function, 80)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    _fn := to_regprocedure(format('%I.%I(bigint, text)', _schema, _function));
    if _fn is null or (select p.prorettype from pg_proc p where p.oid = _fn) <> 'integer'::regtype then
        raise exception 'register_process_retry: create the function %.%(bigint, text) returns integer first', _schema, _function
            using errcode = 'invalid_parameter_value';
    end if;
    update queues.process set retry_function = _function where process_schema = _schema and process_name = _name;
end $$;

-- Restarts failed instance _id of _process ('schema.name'): the process's retry function
-- records the restart fact with _reason (and who: session_user), keeps the root row and its
-- facts, and makes the instance due so the next tick starts new attempts with a new attempt
-- budget. Returns the run the restart started (2 for the first). Raises, writing nothing:
--   invalid_parameter_value           no reason (NULL or blank), or no id
--   undefined_object                  no such process
--   feature_not_supported             the process has no retry function
--   no_data_found                     the process has no such instance
--   object_not_in_prerequisite_state  the instance is running, waiting or succeeded
create function queues.retry_process(_process text, _id bigint, _reason text)
returns table (process text, instance_id bigint, run integer, reason text, restarted_at timestamptz, restarted_by text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _p   queues.process;
    _run integer;
begin
    if _reason is null or btrim(_reason) = '' then
        raise exception 'retry_process: a reason is required (it is recorded with the restart)'
            using errcode = 'invalid_parameter_value';
    end if;
    if _id is null then
        raise exception 'retry_process: an instance id is required' using errcode = 'invalid_parameter_value';
    end if;
    select * into _p from queues.process p where p.process = _process;
    if not found then
        raise exception 'retry_process: unknown process %; registered: %', coalesce(quote_literal(left(_process, 120)), 'NULL'),
            coalesce((select string_agg(p.process, ', ' order by p.process) from queues.process p), 'none')
            using errcode = 'undefined_object';
    end if;
    if _p.retry_function is null then
        raise exception 'retry_process: % cannot be retried by hand (it registered no retry function)', _p.process
            using errcode = 'feature_not_supported';
    end if;
    execute format('select %I.%I($1, $2)', _p.process_schema, _p.retry_function) into _run using _id, _reason;
    return query select _p.process, _id, _run, btrim(_reason), now(), session_user::text;
end $$;

-- Grants: nothing for PUBLIC, nothing for the worker. An operator retries as the schema's
-- owner (the CLI, the dashboard); grant execute on queues.retry_process to an operator's role
-- to delegate it (docs/security.md).
revoke all on function
    queues.register_process_retry(text, text, text),
    queues.retry_process(text, bigint, text)
from public;
