-- Restarts failed instance _id of _process ('schema.name'): the process's retry function
-- records the restart fact with _reason (and who: session_user), keeps the root row and its
-- facts, and makes the instance due so the next tick starts new attempts with a new attempt
-- budget. Returns the run the restart started (2 for the first). Raises, writing nothing:
--   invalid_parameter_value           no reason (NULL or blank), or no id
--   undefined_object                  no such process
--   feature_not_supported             the process has no retry function
--   no_data_found                     the process has no such instance
--   object_not_in_prerequisite_state  the instance is running, waiting or succeeded
create or replace function queues.retry_process(_process text, _id bigint, _reason text)
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
revoke all on function queues.retry_process(text, bigint, text) from public;
