-- The schedule's row, locked for the change, or P0002 when there is none; a malformed name is
-- 22023.
create or replace function internal.lock_schedule(_label text, _name text)
returns queues.schedule
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
    _s queues.schedule;
begin
    if _name is null or _name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' or length(_name) > 128 then
        raise exception '%: _name % is not a schedule name', _label, coalesce(quote_literal(left(_name, 140)), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    -- The leader's queues.enqueue_schedule_tick locks the row the same way for one tick: a wait
    -- here is that statement's, milliseconds.
    select * into _s from queues.schedule s where s.name = _name for no key update;
    if not found then
        raise exception '%: schedule % does not exist', _label, quote_literal(_name) using errcode = 'no_data_found';
    end if;
    return _s;
end $$;
revoke all on function internal.lock_schedule(text, text) from public;
