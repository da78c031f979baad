-- Starts deleting an account, once per account. Bad input is answered with
-- validation_failure_message (and a null id), never an exception.
create or replace function accounts.kickoff_account_deletion(
    _account_id bigint,
    _scheduled_at timestamptz default now(),
    out account_deletion_task_id bigint,
    out validation_failure_message text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _account_id is null then
        validation_failure_message := 'kickoff_account_deletion: account_id is required';
        return;
    end if;
    if not exists (select 1 from accounts.account where account_id = _account_id) then
        validation_failure_message := format('kickoff_account_deletion: account %s does not exist', _account_id);
        return;
    end if;
    insert into accounts.account_deletion_task (account_id) values (_account_id)
    on conflict (account_id) do nothing
    returning accounts.account_deletion_task.account_deletion_task_id into account_deletion_task_id;
    if account_deletion_task_id is null then
        select t.account_deletion_task_id into account_deletion_task_id
        from accounts.account_deletion_task t where t.account_id = _account_id;
        return;
    end if;
    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_deletion_supervisor', 'account_deletion_task_id', account_deletion_task_id),
        coalesce(_scheduled_at, now()));
end $$;
revoke all on function accounts.kickoff_account_deletion(bigint, timestamp with time zone) from public;
