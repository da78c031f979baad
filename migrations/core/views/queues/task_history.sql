-- One task's history, merged from where each fact is written once. Order a task's rows by
-- (occurred_at, step, source_id): within one transaction (one occurred_at) an event comes
-- before the claim it made way for (a rescued lease's 'lease_expired', then the new claim),
-- errors after, and the completion last.
--   source 'lease': a claim, event 'claimed' (pending -> running), source_id the lease id;
--   source 'event': a stored state change (retry_scheduled, failed, dead, lease_expired,
--                   recovered, cancelled, released, snoozed, retried, ...), source_id its id;
--   source 'error': a queues.error row, event 'error', detail its message, source_id its id;
--   source 'task':  the completion, event 'completed' (running -> completed) under the task's
--                   last lease, detail the error when the task's channel call failed.
create or replace view queues.task_history as
select e.task_id, e.occurred_at, 0::smallint as step, 'event'::text as source, e.task_event_id as source_id,
       e.event, e.from_status, e.to_status, e.lease_id, e.worker_id, e.attempt, e.detail
from queues.task_event e
where e.event not in ('claimed', 'completed')  -- written before 0032; read from their sources below
union all
select l.task_id, l.leased_at, 1::smallint, 'lease', l.task_lease_id,
       'claimed', 'pending'::queues.task_status, 'running'::queues.task_status, l.task_lease_id, l.worker_id, l.attempt, null
from queues.task_lease l
union all
select r.task_id, r.occurred_at, 2::smallint, 'error', r.error_id,
       'error', null, null,
       case when r.context ->> 'lease_id' ~ '^[0-9]{1,18}$' then (r.context ->> 'lease_id')::bigint end,  -- as the writers put it
       r.context ->> 'worker_id', null, r.error_message
from queues.error r
where r.task_id is not null
union all
select t.task_id, t.completed_at, 3::smallint, 'task', t.task_id,
       'completed', 'running'::queues.task_status, 'completed'::queues.task_status, t.lease_id, t.worker_id, t.attempt,
       case when t.call_failure is not null then t.last_error end
from queues.task t
where t.status = 'completed';
revoke all on queues.task_history from public;
comment on view queues.task_history is 'Every task''s history in one place: claims (task_lease), state changes (task_event), errors (error) and the completion (task). Order by occurred_at, step, source_id.';
