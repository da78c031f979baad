-- Seeing the accounts processes (docs/processes.md, "Seeing processes"): instances views for the
-- account deletion and the anonymization it starts, registered in queues.process (core/0025),
-- and the file deletion view redefined so that a file deletion started by an account deletion
-- names it as its parent (parent_process 'accounts.account_deletion', parent_id).

-- When an account deletion waits until: NULL while something it started (a file deletion of the
-- account's files, the account's anonymization) has no terminal fact, or a supervisor run is due
-- or running; else its next supervisor run (queues.process_next_run). The one place that
-- decides 'waiting'.
create function accounts.account_deletion_wait_until(_account_deletion_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case
        when exists (select 1 from accounts.account_deletion_task ad
                     join files.file fl on fl.owner_account_id = ad.account_id
                     join files.file_deletion_task d on d.file_id = fl.file_id
                     where ad.account_deletion_task_id = _account_deletion_task_id
                       and not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = d.file_deletion_task_id)
                       and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = d.file_deletion_task_id))
          or exists (select 1 from accounts.account_deletion_task ad
                     join accounts.account_anonymization_task n on n.account_id = ad.account_id
                     where ad.account_deletion_task_id = _account_deletion_task_id
                       and not exists (select 1 from accounts.account_anonymization_task_succeeded s where s.account_anonymization_task_id = n.account_anonymization_task_id)
                       and not exists (select 1 from accounts.account_anonymization_task_failed f where f.account_anonymization_task_id = n.account_anonymization_task_id))
        then null
        else queues.process_next_run('accounts.account_deletion_supervisor', _account_deletion_task_id)
    end
$$;

-- The instances of accounts.account_deletion (docs/processes.md, "Seeing processes"); it has
-- no attempts of its own (attempts is NULL): its children have them. One branch per state, so
-- a filter on state reads only that state's rows; accounts.account_deletion_wait_until tells
-- waiting from running.
create view accounts.account_deletion_instances as
select t.account_deletion_task_id as instance_id, 'succeeded'::text as state, null::timestamptz as wait_until,
       null::integer as attempts,
       t.created_at as started_at, s.created_at as ended_at, null::text as error,
       null::text as parent_process, null::bigint as parent_id
from accounts.account_deletion_task_succeeded s
join accounts.account_deletion_task t on t.account_deletion_task_id = s.account_deletion_task_id
union all
select t.account_deletion_task_id, 'failed', null,
       null::integer,
       t.created_at, f.created_at, f.error_message, null::text, null::bigint
from accounts.account_deletion_task_failed f
join accounts.account_deletion_task t on t.account_deletion_task_id = f.account_deletion_task_id
union all
select t.account_deletion_task_id, 'waiting', w.wait_until,
       null::integer,
       t.created_at, null, null, null::text, null::bigint
from accounts.account_deletion_task t
cross join lateral (select accounts.account_deletion_wait_until(t.account_deletion_task_id) as wait_until
                    where not exists (select 1 from accounts.account_deletion_task_succeeded s where s.account_deletion_task_id = t.account_deletion_task_id)
                      and not exists (select 1 from accounts.account_deletion_task_failed f where f.account_deletion_task_id = t.account_deletion_task_id)
                    offset 0) w
where w.wait_until is not null
union all
select t.account_deletion_task_id, 'running', null,
       null::integer,
       t.created_at, null, null, null::text, null::bigint
from accounts.account_deletion_task t
cross join lateral (select accounts.account_deletion_wait_until(t.account_deletion_task_id) as wait_until
                    where not exists (select 1 from accounts.account_deletion_task_succeeded s where s.account_deletion_task_id = t.account_deletion_task_id)
                      and not exists (select 1 from accounts.account_deletion_task_failed f where f.account_deletion_task_id = t.account_deletion_task_id)
                    offset 0) w
where w.wait_until is null;

-- When an accounts.account_anonymization instance waits until: NULL while an attempt is outstanding
-- (its task is queued or running) or a supervisor run is due or running; else the next
-- supervisor run, scheduled in the future (queues.process_next_run). The one place that decides
-- 'waiting'.
create function accounts.account_anonymization_wait_until(_account_anonymization_task_id bigint) returns timestamptz
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select case
        when exists (select 1 from accounts.account_anonymization_attempt a
                     where a.account_anonymization_task_id = _account_anonymization_task_id
                       and not exists (select 1 from accounts.account_anonymization_attempt_succeeded s where s.account_anonymization_attempt_id = a.account_anonymization_attempt_id)
                       and not exists (select 1 from accounts.account_anonymization_attempt_failed f where f.account_anonymization_attempt_id = a.account_anonymization_attempt_id))
        then null
        else queues.process_next_run('accounts.account_anonymization_supervisor', _account_anonymization_task_id)
    end
$$;

-- The instances of accounts.account_anonymization (docs/processes.md, "Seeing processes"): one branch
-- per state, so a filter on state reads only that state's rows; accounts.account_anonymization_wait_until
-- tells waiting from running.
create view accounts.account_anonymization_instances as
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
union all
select t.account_anonymization_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from accounts.account_anonymization_attempt a where a.account_anonymization_task_id = t.account_anonymization_task_id),
       t.created_at, null, null, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from accounts.account_anonymization_task t
cross join lateral (select accounts.account_anonymization_wait_until(t.account_anonymization_task_id) as wait_until
                    where not exists (select 1 from accounts.account_anonymization_task_succeeded s where s.account_anonymization_task_id = t.account_anonymization_task_id)
                      and not exists (select 1 from accounts.account_anonymization_task_failed f where f.account_anonymization_task_id = t.account_anonymization_task_id)
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
                      and not exists (select 1 from accounts.account_anonymization_task_failed f where f.account_anonymization_task_id = t.account_anonymization_task_id)
                    offset 0) w
left join accounts.account_deletion_task ad on ad.account_id = t.account_id
where w.wait_until is null;

-- The file deletion view again (files/0003), now naming the account deletion that started a
-- file deletion: the one of the file's owner.
-- The instances of files.file_deletion (docs/processes.md, "Seeing processes"): one branch
-- per state, so a filter on state reads only that state's rows; files.file_deletion_wait_until
-- tells waiting from running.
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
union all
select t.file_deletion_task_id, 'waiting', w.wait_until,
       (select count(*)::integer from files.file_deletion_attempt a where a.file_deletion_task_id = t.file_deletion_task_id),
       t.created_at, null, null, case when ad.account_deletion_task_id is not null then 'accounts.account_deletion' end, ad.account_deletion_task_id
from files.file_deletion_task t
cross join lateral (select files.file_deletion_wait_until(t.file_deletion_task_id) as wait_until
                    where not exists (select 1 from files.file_deletion_task_succeeded s where s.file_deletion_task_id = t.file_deletion_task_id)
                      and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = t.file_deletion_task_id)
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
                      and not exists (select 1 from files.file_deletion_task_failed f where f.file_deletion_task_id = t.file_deletion_task_id)
                    offset 0) w
left join files.file fl on fl.file_id = t.file_id
left join accounts.account_deletion_task ad on ad.account_id = fl.owner_account_id
where w.wait_until is null;

select queues.register_process('accounts', 'account_deletion', 'Account deletion',
    'An account deleted: every file of it deleted (files.file_deletion), then anonymized (accounts.account_anonymization); api.request_account_deletion.');
select queues.register_process('accounts', 'account_anonymization', 'Account anonymization',
    'The personal data of an account erased, with retries and backoff; started by an account deletion.');

-- Grants: nothing for PUBLIC or the worker; the schema's owner reads them (queues.process_instances).
revoke all on accounts.account_deletion_instances, accounts.account_anonymization_instances, files.file_deletion_instances from public;
revoke all on function accounts.account_deletion_wait_until(bigint), accounts.account_anonymization_wait_until(bigint) from public;
