-- The backoff of a process's next attempt after _failures failed ones: exponential from _base,
-- capped at _max. PL/pgSQL (its plan cached): a supervisor tick computes it for every instance
-- it decides.
create or replace function queues.process_backoff(_failures integer, _base interval, _max interval) returns interval
language plpgsql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
begin
    return case
        when coalesce(_failures, 0) <= 0 then interval '0'
        when _failures >= 31 then _max
        else least(_max, _base * power(2, _failures - 1)::double precision)
    end;
end $$;
revoke all on function queues.process_backoff(integer, interval, interval) from public;
