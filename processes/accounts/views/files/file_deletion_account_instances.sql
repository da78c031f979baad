-- The instances of files.file_deletion with the accounts set installed (docs/processes.md,
-- "Seeing processes"): files.file_deletion_instances, each naming the account deletion that
-- started it, the one of its file's owner. The accounts set points the process registry's
-- instances view of files.file_deletion here (accounts/0005), so queues.process_instances, the
-- dashboard and `taskorch processes` show the parent; a filter on state still reads only that
-- state's branch of the view below.
create or replace view files.file_deletion_account_instances as
select i.instance_id, i.state, i.wait_until, i.attempts, i.started_at, i.ended_at, i.error,
       case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end as parent_process,
       ad.account_deletion_task_id as parent_id
from files.file_deletion_instances i
join files.file_deletion_task t on t.file_deletion_task_id = i.instance_id
left join files.file fl on fl.file_id = t.file_id
left join accounts.account_deletion_task ad on ad.account_id = fl.owner_account_id;
revoke all on files.file_deletion_account_instances from public;
