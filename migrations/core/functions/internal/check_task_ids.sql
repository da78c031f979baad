-- The distinct ids of an id list, checked: 1 to 1,000 positive ids.
create or replace function internal.check_task_ids(_label text, _task_ids bigint[])
returns bigint[]
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
declare
    _ids bigint[];
begin
    if _task_ids is null or cardinality(_task_ids) = 0 then
        raise exception '%: _task_ids must name at least one task', _label using errcode = 'invalid_parameter_value';
    end if;
    if exists (select from unnest(_task_ids) i where i is null or i <= 0) then
        raise exception '%: _task_ids must be positive task ids, got %', _label,
            (select coalesce(i::text, 'NULL') from unnest(_task_ids) i where i is null or i <= 0 limit 1)
            using errcode = 'invalid_parameter_value';
    end if;
    _ids := array(select distinct i from unnest(_task_ids) i order by i);
    if cardinality(_ids) > 1000 then
        raise exception '%: _task_ids names % tasks; at most 1,000 a call', _label, cardinality(_ids)
            using errcode = 'invalid_parameter_value';
    end if;
    return _ids;
end $$;
revoke all on function internal.check_task_ids(text, bigint[]) from public;
