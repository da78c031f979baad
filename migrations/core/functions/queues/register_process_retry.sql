-- Registers _function, a function <_schema>._function(bigint, text) returning integer, as the
-- way to retry an instance of the registered process <_schema>.<_name>. Bad input raises
-- invalid_parameter_value naming the problem; nothing is written then.
create or replace function queues.register_process_retry(_schema text, _name text, _function text) returns void
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
revoke all on function queues.register_process_retry(text, text, text) from public;
