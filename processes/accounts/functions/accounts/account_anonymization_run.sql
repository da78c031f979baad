-- The current run of an anonymization: 1, or the run its last restart started.
create or replace function accounts.account_anonymization_run(_account_anonymization_task_id bigint) returns integer
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
begin
    return (select coalesce(max(r.run), 1) from accounts.account_anonymization_task_restarted r
            where r.account_anonymization_task_id = _account_anonymization_task_id);
end $$;
revoke all on function accounts.account_anonymization_run(bigint) from public;
