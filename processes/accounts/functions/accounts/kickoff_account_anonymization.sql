-- Kickoff of an account's anonymization (by its account deletion), once.
create or replace function accounts.kickoff_account_anonymization(
    _account_id bigint,
    out account_anonymization_task_id bigint,
    out validation_failure_message text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _account_id is null or not exists (select 1 from accounts.account where account_id = _account_id) then
        validation_failure_message := format('kickoff_account_anonymization: account %s does not exist', coalesce(_account_id::text, 'NULL'));
        return;
    end if;
    insert into accounts.account_anonymization_task (account_id) values (_account_id)
    on conflict (account_id) do nothing
    returning accounts.account_anonymization_task.account_anonymization_task_id into account_anonymization_task_id;
    if account_anonymization_task_id is null then
        select t.account_anonymization_task_id into account_anonymization_task_id
        from accounts.account_anonymization_task t where t.account_id = _account_id;
        return;
    end if;
    perform queues.enqueue('db_function',
        jsonb_build_object('db_function', 'accounts.account_anonymization_supervisor',
                           'account_anonymization_task_id', account_anonymization_task_id));
end $$;
revoke all on function accounts.kickoff_account_anonymization(bigint) from public;
