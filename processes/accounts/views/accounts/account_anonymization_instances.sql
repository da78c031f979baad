-- The instances of accounts.account_anonymization (docs/processes.md, "Seeing processes"): a
-- failed fact of a run that was restarted is not terminal; attempts count every run's.
create or replace view accounts.account_anonymization_instances as
select t.account_anonymization_task_id as instance_id, 'succeeded'::text as state, null::timestamptz as wait_until,
       (select count(*)::integer from accounts.account_anonymization_attempt a where a.account_anonymization_task_id = t.account_anonymization_task_id) as attempts,
       t.created_at as started_at, s.created_at as ended_at, null::text as error,
       case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end as parent_process, ad.account_deletion_task_id as parent_id
from accounts.account_anonymization_task_succeeded s
join accounts.account_anonymization_task t on t.account_anonymization_task_id = s.account_anonymization_task_id
left join accounts.account_deletion_task ad on ad.account_id = t.account_id
union all
select t.account_anonymization_task_id, 'failed', null,
       (select count(*)::integer from accounts.account_anonymization_attempt a where a.account_anonymization_task_id = t.account_anonymization_task_id),
       t.created_at, f.created_at, f.error_message, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from accounts.account_anonymization_task_failed f
join accounts.account_anonymization_task t on t.account_anonymization_task_id = f.account_anonymization_task_id
left join accounts.account_deletion_task ad on ad.account_id = t.account_id
where not exists (select 1 from accounts.account_anonymization_task_restarted z
                  where z.account_anonymization_task_id = f.account_anonymization_task_id and z.run > f.run)
union all
select t.account_anonymization_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from accounts.account_anonymization_attempt a where a.account_anonymization_task_id = t.account_anonymization_task_id),
       t.created_at, null, null, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from accounts.account_anonymization_task t
cross join lateral (select accounts.account_anonymization_wait_until(t.account_anonymization_task_id) as wait_until
                    where not exists (select 1 from accounts.account_anonymization_task_succeeded s where s.account_anonymization_task_id = t.account_anonymization_task_id)
                      and not exists (select 1 from accounts.account_anonymization_task_failed f where f.account_anonymization_task_id = t.account_anonymization_task_id
                                        and not exists (select 1 from accounts.account_anonymization_task_restarted z
                                                        where z.account_anonymization_task_id = f.account_anonymization_task_id and z.run > f.run))
                    offset 0) w
left join accounts.account_deletion_task ad on ad.account_id = t.account_id
where w.wait_until is not null
union all
select t.account_anonymization_task_id, 'running', null,
       (select count(*)::integer from accounts.account_anonymization_attempt a where a.account_anonymization_task_id = t.account_anonymization_task_id),
       t.created_at, null, null, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from accounts.account_anonymization_task t
cross join lateral (select accounts.account_anonymization_wait_until(t.account_anonymization_task_id) as wait_until
                    where not exists (select 1 from accounts.account_anonymization_task_succeeded s where s.account_anonymization_task_id = t.account_anonymization_task_id)
                      and not exists (select 1 from accounts.account_anonymization_task_failed f where f.account_anonymization_task_id = t.account_anonymization_task_id
                                        and not exists (select 1 from accounts.account_anonymization_task_restarted z
                                                        where z.account_anonymization_task_id = f.account_anonymization_task_id and z.run > f.run))
                    offset 0) w
left join accounts.account_deletion_task ad on ad.account_id = t.account_id
where w.wait_until is null;
revoke all on accounts.account_anonymization_instances from public;
