-- Leader maintenance of the history partitions. As the leader of _term, it
--   (a) creates the day partitions of today (UTC) to today + _ahead_days that are missing;
--   (b) moves the rows the default partitions caught into their days' partitions, created as
--       needed;
--   (c) drops the day partitions (only ours: named <table>_pYYYYMMDD with exactly that day's
--       bounds; never a default partition) whose upper bound is older than now() - _keep. A
--       NULL or negative _keep keeps history forever: nothing is dropped.
-- All in one transaction. Returns {"created": [partitions], "moved": rows, "dropped":
-- [partitions]}; NULL when _term is not the current leader term (nothing is done). A lock it
-- waits for longer than lock_timeout (5 seconds) fails the call and undoes it; the leader tries
-- again at its next pass. Dropping a partition locks its parent for a moment (ACCESS EXCLUSIVE),
-- once per table and day.
create or replace function queues.maintain_history(_term bigint, _keep interval, _ahead_days integer default 2)
returns jsonb
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp set timezone = 'UTC' set datestyle = 'ISO, YMD' set lock_timeout = '5s' as $$
declare
    _table   text;
    _col     text;
    _day     date;
    _today   date := (now() at time zone 'UTC')::date;
    _r       record;
    _p       record;
    _created text[] := '{}';
    _dropped text[] := '{}';
    _moved   bigint := 0;
begin
    if _ahead_days is null or _ahead_days not between 0 and 366 then
        raise exception 'maintain_history: ahead_days must be between 0 and 366, got %', coalesce(_ahead_days::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if not internal.holds_leader_term(_term) then
        return null;
    end if;

    foreach _table in array array['task_lease', 'task_event'] loop
        _col := case _table when 'task_lease' then 'leased_at' else 'occurred_at' end;
        -- (b) The default partition is empty unless something went wrong: reading it is cheap.
        -- A row dated beyond the years a partition name can hold stays where it is.
        for _day in execute format('select distinct (%I at time zone ''UTC'')::date from queues.%I
                                    where %I >= timestamptz ''0001-01-01 00:00+00'' and %I < timestamptz ''9999-12-31 00:00+00''
                                    order by 1', _col, _table || '_default', _col, _col) loop
            _r := internal.history_partition(_table, _day);
            _moved := _moved + _r.moved;
            if _r.created then
                _created := _created || (_table || '_p' || to_char(_day, 'YYYYMMDD'));
            end if;
        end loop;
        -- (a)
        for _day in select _today + g from generate_series(0, _ahead_days) g loop
            _r := internal.history_partition(_table, _day);
            if _r.created then
                _created := _created || (_table || '_p' || to_char(_day, 'YYYYMMDD'));
            end if;
        end loop;
        -- (c)
        if _keep is null or _keep < interval '0' then
            continue;
        end if;
        for _p in
            select c.relname::text as name, pg_get_expr(c.relpartbound, c.oid) as bound
            from pg_inherits i
            join pg_class c on c.oid = i.inhrelid
            where i.inhparent = format('queues.%I', _table)::regclass
              and c.relname ~ ('^' || _table || '_p[0-9]{8}$')
            order by c.relname
        loop
            begin
                _day := to_date(right(_p.name, 8), 'YYYYMMDD');
            exception when others then
                continue;  -- eight digits that are no date: not ours
            end;
            if to_char(_day, 'YYYYMMDD') <> right(_p.name, 8)
               or _p.bound is distinct from format('FOR VALUES FROM (%L) TO (%L)', _day::timestamptz, (_day + 1)::timestamptz)
               or (_day + 1)::timestamptz >= now() - _keep then
                continue;
            end if;
            execute format('drop table queues.%I', _p.name);
            _dropped := _dropped || _p.name;
        end loop;
    end loop;
    return jsonb_build_object('created', to_jsonb(_created), 'moved', _moved, 'dropped', to_jsonb(_dropped));
end $$;
revoke all on function queues.maintain_history(bigint, interval, integer) from public;
grant execute on function queues.maintain_history(bigint, interval, integer) to worker_service_user;
comment on function queues.maintain_history(bigint, interval, integer) is 'Leader maintenance of the partitioned history: creates day partitions ahead, moves rows the default partitions caught, drops days older than _keep.';
