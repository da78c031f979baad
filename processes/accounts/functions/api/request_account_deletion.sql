-- Seed 002's entry point: flags the account 'deleted' and starts its deletion. Idempotent.
create or replace function api.request_account_deletion(
    _account_id bigint,
    out account_deletion_task_id bigint,
    out validation_failure_message text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _k record;
begin
    select * into _k from accounts.kickoff_account_deletion(_account_id);
    account_deletion_task_id := _k.account_deletion_task_id;
    validation_failure_message := _k.validation_failure_message;
    if validation_failure_message is null then
        insert into accounts.account_flag (account_id, flag) values (_account_id, 'deleted') on conflict do nothing;
    end if;
end $$;
revoke all on function api.request_account_deletion(bigint) from public;
