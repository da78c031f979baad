-- Called by the retries by hand (queues.retry_task, retry_tasks, retry_tasks_matching, the
-- by-id actions) with the tasks _ids they just brought back from failed, dead or cancelled (their
-- rows locked): a task that names parents waits for those that have not ended
-- (internal.rewait_task); then the tasks that the cascade cancelled and that name a retried task
-- as a parent (status 'cancelled', policy 'cancel', whose latest event is the cascade's
-- cancellation, naming one of their parents) wait again, transitively, in id order per level of
-- the graph, unless one of their parents is still failed, dead or cancelled (docs/workflows.md,
-- "Retrying a node"): a join cancelled by two failed parents waits again once both are retried.
-- A task cancelled by an operator, or retried or deleted since, is left alone. Returns how many
-- descendants it restored.
create or replace function internal.rewait_after_retry(_ids bigint[], _actor text)
returns integer
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    _id bigint;
    _level bigint[];
    _next bigint[];
    _r record;
    _st queues.task_status;
    _restored integer := 0;
    _released boolean := false;
begin
    _level := coalesce(array(select t.task_id from queues.task t
                             where t.task_id = any (_ids) and t.after_ids is not null and t.status = 'pending'
                             order by t.task_id), '{}');
    foreach _id in array _level loop
        perform internal.rewait_task(_id, null, _actor);
    end loop;
    _level := coalesce(array(select distinct i from unnest(_ids) i where i is not null order by i), '{}');
    while cardinality(_level) > 0 loop
        _next := '{}';
        for _r in
            select c.task_id, c.via
            from (select t.task_id, t.after_ids,
                         substring(le.detail from '^parent task ([0-9]+) ended [a-z]+$')::bigint as because,
                         (select min(p) from unnest(t.after_ids) p where p = any (_level)) as via
                  from queues.task t
                  cross join lateral (select e.event, e.actor, e.detail
                                      from queues.task_event e
                                      where e.task_id = t.task_id
                                      order by e.occurred_at desc, e.task_event_id desc
                                      limit 1) le
                  where t.after_ids && _level
                    and t.status = 'cancelled' and t.on_parent_failure = 'cancel'
                    -- The latest event is the cascade's own cancellation (no actor: not an operator's).
                    and le.event = 'cancelled' and le.actor is null
                  order by t.task_id
                  for no key update of t) c
            where c.because = any (c.after_ids)
            order by c.task_id
        loop
            _st := internal.rewait_task(_r.task_id, _r.via, _actor);
            continue when _st = 'cancelled';
            _restored := _restored + 1;
            _released := _released or _st = 'pending';
            _next := _next || _r.task_id;
        end loop;
        _level := _next;
    end loop;
    if _released then
        perform pg_notify('taskorch_task', '');
    end if;
    return _restored;
end $$;
revoke all on function internal.rewait_after_retry(bigint[], text) from public;
