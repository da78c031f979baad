-- Retry by hand with the accounts set (docs/processes.md, "Retrying a failed process").
--
-- files/0005 made file deletions retryable by hand and their instances view run-aware; 0002
-- had redefined that view to name the account deletion that started a file deletion. This
-- redefines it once more, with both: the parent, and a failed fact of a restarted run not
-- terminal. (The account deletion and the anonymization are not retryable by hand yet:
-- queues.retry_process answers that they registered no retry function.)

create or replace view files.file_deletion_instances as
select t.file_deletion_task_id as instance_id, 'succeeded'::text as state, null::timestamptz as wait_until,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id) as attempts,
       t.created_at as started_at, s.created_at as ended_at, null::text as error,
       case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end as parent_process, ad.account_deletion_task_id as parent_id
from files.file_deletion_task_succeeded s
join files.file_deletion_task t on t.file_deletion_task_id = s.file_deletion_task_id
left join files.file fl on fl.file_id = t.file_id
left join accounts.account_deletion_task ad on ad.account_id = fl.owner_account_id
union all
select t.file_deletion_task_id, 'failed', null,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id),
       t.created_at, f.created_at, f.error_message, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from files.file_deletion_task_failed f
join files.file_deletion_task t on t.file_deletion_task_id = f.file_deletion_task_id
left join files.file fl on fl.file_id = t.file_id
left join accounts.account_deletion_task ad on ad.account_id = fl.owner_account_id
where not exists (select 1 from files.file_deletion_task_restarted z
                  where z.file_deletion_task_id = f.file_deletion_task_id and z.run > f.run)
union all
select t.file_deletion_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id),
       t.created_at, null, null, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from files.file_deletion_task t
cross join lateral (select files.file_deletion_wait_until(t.file_deletion_task_id) as wait_until
                    where not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = t.file_deletion_task_id)
                      and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = t.file_deletion_task_id
                                        and not exists (select 1 from files.file_deletion_task_restarted z
                                                        where z.file_deletion_task_id = f.file_deletion_task_id and z.run > f.run))
                    offset 0) w
left join files.file fl on fl.file_id = t.file_id
left join accounts.account_deletion_task ad on ad.account_id = fl.owner_account_id
where w.wait_until is not null
union all
select t.file_deletion_task_id, 'running', null,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id),
       t.created_at, null, null, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from files.file_deletion_task t
cross join lateral (select files.file_deletion_wait_until(t.file_deletion_task_id) as wait_until
                    where not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = t.file_deletion_task_id)
                      and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = t.file_deletion_task_id
                                        and not exists (select 1 from files.file_deletion_task_restarted z
                                                        where z.file_deletion_task_id = f.file_deletion_task_id and z.run > f.run))
                    offset 0) w
left join files.file fl on fl.file_id = t.file_id
left join accounts.account_deletion_task ad on ad.account_id = fl.owner_account_id
where w.wait_until is null;

revoke all on files.file_deletion_instances from public;
