-- Facts helper: whether an attempt of the anonymization's current run succeeded (a retry by hand
-- starts a new run: docs/processes.md, "Retrying a failed process").
create or replace function accounts.has_account_anonymization_succeeded_attempt(_account_anonymization_task_id bigint) returns boolean
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
begin
    return exists (select 1 from accounts.account_anonymization_attempt a
                   join accounts.account_anonymization_attempt_succeeded s using (account_anonymization_attempt_id)
                   where a.account_anonymization_task_id = _account_anonymization_task_id
                     and a.account_anonymization_attempt_id > coalesce((select max(z.last_attempt_id) from accounts.account_anonymization_task_restarted z
                                                                        where z.account_anonymization_task_id = _account_anonymization_task_id), 0));
end $$;
revoke all on function accounts.has_account_anonymization_succeeded_attempt(bigint) from public;
