-- Creates the day partition of queues.<_table> (task_lease or task_event) for UTC day _day,
-- unless a table of that name exists, moving into it the rows of that day the default partition
-- caught. The partition is built beside the table and attached, which locks the parent in SHARE
-- UPDATE EXCLUSIVE mode only (claims go on inserting); the default partition is locked first,
-- so no row of that day can land in it between the move and the attach. Identifiers come from
-- format('%I'), bounds from the date: nothing here is built from text a caller gave.
create or replace function internal.history_partition(_table text, _day date, out created boolean, out moved bigint)
language plpgsql volatile set search_path = pg_catalog, pg_temp set timezone = 'UTC' set datestyle = 'ISO, YMD' as $$
declare
    _col  text;
    _name text;
    _lo   timestamptz;
    _hi   timestamptz;
begin
    _col := case _table when 'task_lease' then 'leased_at' when 'task_event' then 'occurred_at' end;
    if _col is null then
        raise exception 'history_partition: table must be task_lease or task_event, got %', coalesce(quote_literal(_table), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _day is null or _day not between date '0001-01-01' and date '9999-12-30' then
        raise exception 'history_partition: day must be between 0001-01-01 and 9999-12-30, got %', coalesce(_day::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    created := false;
    moved := 0;
    _name := _table || '_p' || to_char(_day, 'YYYYMMDD');
    if to_regclass(format('queues.%I', _name)) is not null then
        return;
    end if;
    _lo := _day::timestamptz;
    _hi := (_day + 1)::timestamptz;
    execute format('lock table queues.%I in access exclusive mode', _table || '_default');
    execute format('create table queues.%I (like queues.%I including defaults)', _name, _table);
    execute format('with m as (delete from queues.%I where %I >= $1 and %I < $2 returning *) insert into queues.%I select * from m',
        _table || '_default', _col, _col, _name) using _lo, _hi;
    get diagnostics moved = row_count;
    execute format('alter table queues.%I attach partition queues.%I for values from (%L) to (%L)', _table, _name, _lo, _hi);
    execute format('create trigger %I before update on queues.%I for each statement execute function internal.refuse_update()',
        _table || '_append_only', _name);
    created := true;
end $$;
revoke all on function internal.history_partition(text, date) from public;
