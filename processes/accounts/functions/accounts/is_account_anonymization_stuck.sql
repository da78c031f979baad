-- Stuck (seed 002: accounts.is_account_anonymization_stuck(account_id)): every allowed attempt
-- of the current run failed and none of them succeeded.
create or replace function accounts.is_account_anonymization_stuck(_account_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (
        select 1 from accounts.account_anonymization_task t
        where t.account_id = _account_id
          and not accounts.has_account_anonymization_succeeded_attempt(t.account_anonymization_task_id)
          and accounts.count_account_anonymization_failed_attempts(t.account_anonymization_task_id)
              >= (select max_attempts from accounts.process_config where process = 'account_anonymization'))
$$;
revoke all on function accounts.is_account_anonymization_stuck(bigint) from public;
