-- Trigger of accounts.account_deletion_task_failed: the failed fact names its run.
create or replace function accounts.account_deletion_task_failed_run() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    new.run := accounts.account_deletion_run(new.account_deletion_task_id);
    return new;
end $$;
revoke all on function accounts.account_deletion_task_failed_run() from public;
