-- Refuses (22023, naming what is wrong) a cron expression the leader could not run: the
-- leader's parser (github.com/robfig/cron/v3, ParseStandard) and its check that the schedule
-- fires, in SQL, so that a schedule added from SQL is refused at once rather than logged by the
-- leader forever (docs/operations.md, "Periodic schedules"). Accepted: an optional "CRON_TZ=zone "
-- or "TZ=zone " prefix naming a time zone PostgreSQL knows; a descriptor (@yearly, @annually,
-- @monthly, @weekly, @daily, @midnight, @hourly, or @every <a positive Go duration> such as
-- 1h30m); or 5 fields: minute 0-59, hour 0-23, day of month 1-31, month 1-12 or jan-dec, day of
-- week 0-6 or sun-sat. An expression that never fires (the 30th of February), @every with a
-- duration that is not positive (which the parser would run every second) and a zone PostgreSQL
-- does not list (such as "Local" or the leap-second zones right/...) are refused, here as by the
-- leader's maintenance.ParseCron (TestAddScheduleAgreesWithTheLeader).
create or replace function internal.check_cron(_label text, _cron text)
returns void
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
declare
    _spec text := _cron;
    _zone text;
    _fields text[];
    _dom record;
    _month record;
    _dow record;
    _every numeric;
begin
    if _spec is null or _spec = '' or length(_spec) > 256 then
        raise exception '%: _cron % is malformed: want 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @hourly or @every 10m',
            _label, coalesce(quote_literal(left(_spec, 260)), 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    if _spec ~ '^(CRON_TZ|TZ)=' then
        _zone := substring(_spec from '^[A-Z_]+=(\S*)\s');
        -- An empty zone is UTC, as for the parser.
        if _zone is null or (_zone <> '' and not exists (select from pg_timezone_names where name = _zone)) then
            raise exception '%: _cron %: % is not a time zone', _label, quote_literal(_spec),
                coalesce(quote_literal(substring(_spec from '^[A-Z_]+=(\S*)')), 'NULL') using errcode = 'invalid_parameter_value';
        end if;
        _spec := btrim(substring(_spec from '^\S+\s(.*)$'), E' \t\n\r');
    end if;
    if _spec like '@%' then
        if _spec in ('@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly') then
            return;
        end if;
        if _spec ~ '^@every (\+?)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$' then
            -- The duration in nanoseconds as Go's time.ParseDuration adds it up (each term's
            -- fraction truncated): it must be positive and fit in an int64.
            select sum(trunc(coalesce(nullif(split_part(m[1], '.', 1), ''), '0')::numeric * u.ns
                             + coalesce(('0.' || nullif(split_part(m[1], '.', 2), ''))::numeric, 0) * u.ns))
            into _every
            from regexp_matches(substr(_spec, 8), '([0-9]*\.?[0-9]*)(ns|us|µs|μs|ms|s|m|h)', 'g') as m
            join (values ('ns', 1::numeric), ('us', 1e3), ('µs', 1e3), ('μs', 1e3), ('ms', 1e6), ('s', 1e9),
                         ('m', 6e10), ('h', 3.6e12)) as u(unit, ns) on u.unit = m[2];
            if _every >= 1 and _every <= 9223372036854775807 then
                return;
            end if;
        end if;
        raise exception '%: _cron %: % is not a descriptor (@yearly, @monthly, @weekly, @daily, @hourly or @every followed by a positive duration such as 90s or 1h30m)',
            _label, quote_literal(_cron), quote_literal(_spec) using errcode = 'invalid_parameter_value';
    end if;
    _fields := regexp_split_to_array(btrim(_spec, E' \t\n\r\v\f'), E'[ \t\n\r\v\f]+');
    if cardinality(_fields) <> 5 then
        raise exception '%: _cron % has % field(s): want 5 (minute hour day-of-month month day-of-week), e.g. ''*/15 * * * *'', or a descriptor such as @hourly',
            _label, quote_literal(_cron), cardinality(_fields) using errcode = 'invalid_parameter_value';
    end if;
    perform internal.cron_field(_label, 'minute', _fields[1], 0, 59);
    perform internal.cron_field(_label, 'hour', _fields[2], 0, 23);
    _dom := internal.cron_field(_label, 'day-of-month', _fields[3], 1, 31);
    _month := internal.cron_field(_label, 'month', _fields[4], 1, 12,
        '{jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec}');
    _dow := internal.cron_field(_label, 'day-of-week', _fields[5], 0, 6, '{sun,mon,tue,wed,thu,fri,sat}');
    -- Day of month and day of week: both must match when either is "*", else either. With the
    -- day of week "*", some day of the month must exist in some month (the 29th of February
    -- does, in leap years).
    if (_dom._star or _dow._star) and not exists (
            select from unnest(_month._values) m, unnest(_dom._values) d
            where d <= (array[31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[m]) then
        raise exception '%: _cron % never fires: no month has that day', _label, quote_literal(_cron)
            using errcode = 'invalid_parameter_value';
    end if;
end $$;
revoke all on function internal.check_cron(text, text) from public;
