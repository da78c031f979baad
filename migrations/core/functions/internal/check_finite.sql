-- Raises 22023 naming _label and _arg when _value is not a time internal.time_in_range accepts.
create or replace function internal.check_finite(_label text, _arg text, _value timestamptz) returns void
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
begin
    if not internal.time_in_range(_value) then
        raise exception '%: % must be a finite time between the years 1 and 9999, got %', _label, _arg, _value
            using errcode = 'invalid_parameter_value';
    end if;
end $$;
revoke all on function internal.check_finite(text, text, timestamp with time zone) from public;
