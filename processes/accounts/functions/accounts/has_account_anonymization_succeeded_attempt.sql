-- Facts helper: whether an attempt of the anonymization succeeded.
create or replace function accounts.has_account_anonymization_succeeded_attempt(_account_anonymization_task_id bigint) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
    select exists (select 1 from accounts.account_anonymization_attempt a
                   join accounts.account_anonymization_attempt_succeeded s using (account_anonymization_attempt_id)
                   where a.account_anonymization_task_id = _account_anonymization_task_id)
$$;
revoke all on function accounts.has_account_anonymization_succeeded_attempt(bigint) from public;
