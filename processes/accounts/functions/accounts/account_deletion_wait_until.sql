-- When an account deletion waits until (its instances view: 'waiting' with this time), run-aware:
-- a child whose current run has no terminal fact is still running.
create or replace function accounts.account_deletion_wait_until(_account_deletion_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case
        when exists (select 1 from accounts.account_deletion_task ad
                     join files.file fl on fl.owner_account_id = ad.account_id
                     join files.file_deletion_task d on d.file_id = fl.file_id
                     where ad.account_deletion_task_id = _account_deletion_task_id
                       and not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = d.file_deletion_task_id)
                       and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = d.file_deletion_task_id
                                         and f.run = files.file_deletion_run(d.file_deletion_task_id)))
          or exists (select 1 from accounts.account_deletion_task ad
                     join accounts.account_anonymization_task n on n.account_id = ad.account_id
                     where ad.account_deletion_task_id = _account_deletion_task_id
                       and not exists (select 1 from accounts.account_anonymization_task_succeeded s where s.account_anonymization_task_id = n.account_anonymization_task_id)
                       and not exists (select 1 from accounts.account_anonymization_task_failed f where f.account_anonymization_task_id = n.account_anonymization_task_id
                                         and f.run = accounts.account_anonymization_run(n.account_anonymization_task_id)))
        then null
        else queues.process_next_run('accounts.account_deletion_supervisor', _account_deletion_task_id)
    end
$$;
revoke all on function accounts.account_deletion_wait_until(bigint) from public;
