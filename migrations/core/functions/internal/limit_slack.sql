-- The part of a token a claim may borrow: a bucket hands out a token once it holds 1 - slack,
-- and its tokens then go below zero by at most the slack, paid back before the next token. It
-- is 2 ms of the rate (at most half a token), so that a claim arriving up to 2 ms before its
-- token is due does not miss it and arrive late, which would cost the rate that time: a bucket
-- full to its burst accrues nothing more. Over any span, the claims stay within burst + rate
-- × span + the slack, and the slack is less than one.
create or replace function internal.limit_slack(_rate double precision) returns double precision
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select least(0.5, _rate * 0.002)
$$;
revoke all on function internal.limit_slack(double precision) from public;
