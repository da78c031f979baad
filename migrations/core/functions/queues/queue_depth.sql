-- The number an autoscaler scales workers on (docs/deployment.md, "Autoscaling"): the tasks of
-- _task_types (every type when NULL) that workers could be running now — those running, and the
-- pending ones that are due, of types whose queue is not paused. Waiting tasks (their parents
-- have not ended) and tasks scheduled later are not counted. It counts rows of the backlog
-- (task_claim_idx, task_lease_expiry_idx), not of the history.
create or replace function queues.queue_depth(_task_types text[] default null)
returns bigint
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    select (select count(*) from queues.task t
            where t.status = 'running'
              and (_task_types is null or t.task_type = any (_task_types)))
         + (select count(*) from queues.task t
            where t.status = 'pending' and t.run_at <= now()
              and (_task_types is null or t.task_type = any (_task_types))
              and not exists (select from queues.queue_pause qp
                              where qp.task_type = t.task_type
                                 or (t.key_scope <> '' and qp.task_type = t.task_type || ':' || t.key_scope)))
$$;
revoke all on function queues.queue_depth(text[]) from public;
grant execute on function queues.queue_depth(text[]) to worker_service_user;
comment on function queues.queue_depth(text[]) is
    'Tasks of _task_types (all when NULL) that workers could run now: running, plus due pending of types not paused; for an autoscaler (docs/deployment.md, "Autoscaling").';
