-- Whether an account has a flag (a fact: 'deleted', 'anonymized').
create or replace function accounts.has_account_flag(_account_id bigint, _flag text) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (select 1 from accounts.account_flag where account_id = _account_id and flag = _flag)
$$;
revoke all on function accounts.has_account_flag(bigint, text) from public;
