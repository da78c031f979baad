-- Facts helper: how many attempts the anonymization's current run made.
create or replace function accounts.count_account_anonymization_attempts(_account_anonymization_task_id bigint) returns integer
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
begin
    return (select count(*)::integer from accounts.account_anonymization_attempt a
            where a.account_anonymization_task_id = _account_anonymization_task_id
              and a.account_anonymization_attempt_id > coalesce((select max(z.last_attempt_id) from accounts.account_anonymization_task_restarted z
                                                                 where z.account_anonymization_task_id = _account_anonymization_task_id), 0));
end $$;
revoke all on function accounts.count_account_anonymization_attempts(bigint) from public;
