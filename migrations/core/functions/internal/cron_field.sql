-- One field of a 5-field cron expression, parsed as the leader's parser
-- (github.com/robfig/cron/v3, ParseStandard) parses it: a comma-separated list of ranges, each
-- "*" or "?", a value, or "a-b", optionally with "/step" ("a/step" runs to the field's maximum);
-- values are numbers, or names where the field has them (_names: lower-case, the name at index i
-- meaning _min + i - 1). Returns the values the field matches, and whether it counts as "*" (a
-- range of "*" or "?" with a step of 1, which decides how day-of-month and day-of-week combine).
-- A malformed field raises 22023 naming it.
create or replace function internal.cron_field(_label text, _what text, _field text, _min integer, _max integer,
                                               _names text[] default null,
                                               out _values integer[], out _star boolean)
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
declare
    _range text;
    _parts text[];
    _bounds text[];
    _lo integer;
    _hi integer;
    _step integer;
    _v text;
    _n integer;
    _any boolean;
begin
    _values := '{}';
    _star := false;
    foreach _range in array coalesce(array_remove(string_to_array(_field, ','), ''), '{}') loop
        _parts := string_to_array(_range, '/');
        if cardinality(_parts) > 2 then
            raise exception '%: _cron: % field % has too many slashes', _label, _what, quote_literal(_range)
                using errcode = 'invalid_parameter_value';
        end if;
        _bounds := string_to_array(_parts[1], '-');
        _any := _bounds[1] in ('*', '?');
        if _any then
            _lo := _min;
            _hi := _max;
        else
            if cardinality(_bounds) > 2 then
                raise exception '%: _cron: % field % has too many hyphens', _label, _what, quote_literal(_range)
                    using errcode = 'invalid_parameter_value';
            end if;
            _lo := null;
            _hi := null;
            for _i in 1 .. cardinality(_bounds) loop
                _v := lower(_bounds[_i]);
                _n := array_position(_names, _v);
                if _n is not null then
                    _n := _min + _n - 1;
                elsif _v ~ '^\+?[0-9]{1,9}$' then
                    _n := _v::integer;
                else
                    raise exception '%: _cron: % field %: % is not a number%', _label, _what, quote_literal(_range),
                        quote_literal(_bounds[_i]), case when _names is not null then ' or a name' else '' end
                        using errcode = 'invalid_parameter_value';
                end if;
                if _i = 1 then _lo := _n; end if;
                _hi := _n;
            end loop;
        end if;
        _step := 1;
        if cardinality(_parts) = 2 then
            if _parts[2] !~ '^\+?[0-9]{1,9}$' then
                raise exception '%: _cron: % field %: step % is not a number', _label, _what, quote_literal(_range),
                    quote_literal(_parts[2]) using errcode = 'invalid_parameter_value';
            end if;
            _step := _parts[2]::integer;
            if cardinality(_bounds) = 1 then
                _hi := _max; -- "a/step" runs to the maximum
            end if;
        end if;
        if _lo < _min or _hi > _max or _lo > _hi then
            raise exception '%: _cron: % field % is out of range: % to %, from % to %', _label, _what, quote_literal(_range),
                _min, _max, _lo, _hi using errcode = 'invalid_parameter_value';
        end if;
        if _step = 0 then
            raise exception '%: _cron: % field %: the step must be positive', _label, _what, quote_literal(_range)
                using errcode = 'invalid_parameter_value';
        end if;
        _star := _star or (_any and _step = 1);
        _values := _values || array(select generate_series(_lo, _hi, _step));
    end loop;
    if cardinality(_values) = 0 then
        raise exception '%: _cron: % field % is empty', _label, _what, coalesce(quote_literal(_field), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
end $$;
revoke all on function internal.cron_field(text, text, text, integer, integer, text[]) from public;
