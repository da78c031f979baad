-- Applies action to the tasks of _ids that are in one of _statuses, locking them in id order and
-- skipping any row another transaction holds (jit off: the retry's subplans make the planner
-- expect a costly statement, and JIT compiled it for a second per batch of 500 that runs in 10 ms);
-- returns the tasks acted on, with the status each
-- had. Retry: pending, due now, attempts reset (a pending task keeps its attempts and is made
-- due now), its limit bucket set again, as queues.retry_task does (a task that names parents
-- waits for those that have not ended, and the tasks its cascade cancelled wait again); a dead task whose debounce
-- key a pending task holds stays (the pending one is the debounced task). Cancel: cancelled,
-- its worker told at commit (taskorch_cancel), as queues.cancel_task does. Delete: the row and
-- its error rows. Each gets an event with the actor.
create or replace function internal.apply_task_action(_action text, _ids bigint[], _statuses queues.task_status[], _actor text, _reason text)
returns table (task_id bigint, from_status queues.task_status)
language plpgsql set search_path = pg_catalog, pg_temp set jit = off as $$
#variable_conflict use_column
declare
    _locked bigint[];
    _done bigint[];
    _from queues.task_status[];
    _notes text[];
begin
    if _action = 'delete' then
        _locked := array(select t.task_id from queues.task t
                         where t.task_id = any (_ids) and t.status = any (_statuses)
                         order by t.task_id
                         for update skip locked);
    else
        _locked := array(select t.task_id from queues.task t
                         where t.task_id = any (_ids) and t.status = any (_statuses)
                         order by t.task_id
                         for no key update skip locked);
    end if;
    if cardinality(_locked) = 0 then
        return;
    end if;

    if _action = 'retry' then
        with ok as (
            select t.task_id, t.status, t.attempt
            from queues.task t
            where t.task_id = any (_locked)
              and (t.debounce_key is null or t.status = 'pending' or (
                   not exists (select from queues.task p
                               where p.task_type = t.task_type and p.key_scope = t.key_scope and p.debounce_key = t.debounce_key and p.status = 'pending')
                   and t.task_id = (select min(q.task_id) from queues.task q
                                    where q.task_id = any (_locked) and q.task_type = t.task_type
                                      and q.key_scope = t.key_scope and q.debounce_key = t.debounce_key)))
        ), upd as (
            update queues.task t
            set status = 'pending', run_at = clock_timestamp(),
                attempt = case when ok.status = 'pending' then t.attempt else 0 end,
                limit_name = (select l.task_type from internal.limit_of(t.task_type, t.payload) l),
                limit_key = (select internal.limit_key(l.key_field, t.payload) from internal.limit_of(t.task_type, t.payload) l
                             where l.task_type is not null)
            from ok
            where t.task_id = ok.task_id
            returning t.task_id, ok.status, ok.attempt
        ), ev as (
            insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail, actor)
            select u.task_id, 'retried', u.status, 'pending', null, session_user, u.attempt,
                   format('retried by hand after %s attempt(s)', u.attempt), _actor
            from upd u
        )
        select array_agg(u.task_id order by u.task_id), array_agg(u.status order by u.task_id) into _done, _from from upd u;
        if cardinality(_done) > 0 then
            -- Tasks that name parents wait for those that have not ended; the tasks their
            -- cascade cancelled wait again (docs/workflows.md, "Retrying a node").
            -- (a pending task, made due now, is not one: its parents were counted).
            perform internal.rewait_after_retry(
                array(select d.id from unnest(_done, _from) as d(id, st) where d.st <> 'pending'), _actor);
            perform pg_notify('taskorch_task', '');
        end if;
    elsif _action = 'cancel' then
        with old as (
            select t.task_id, t.status, t.lease_id, t.lease_expires_at, t.attempt from queues.task t where t.task_id = any (_locked)
        ), upd as (
            update queues.task t
            set status = 'cancelled', cancelled_at = clock_timestamp(), lease_expires_at = null
            from old
            where t.task_id = old.task_id
            returning t.task_id, old.status, old.lease_id, old.lease_expires_at, old.attempt
        ), ev as (
            insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail, actor)
            select u.task_id, 'cancelled', u.status, 'cancelled', u.lease_id, session_user, u.attempt,
                   left(nullif(_reason, ''), 1024), _actor
            from upd u
        )
        select array_agg(u.task_id order by u.task_id), array_agg(u.status order by u.task_id),
               array_agg(u.task_id::text || ':' || u.lease_id::text)
                   filter (where u.status = 'running' and u.lease_expires_at is not null and u.lease_id is not null)
        into _done, _from, _notes
        from upd u;
        -- A running task's worker is told at commit, as by queues.cancel_task.
        perform pg_notify('taskorch_cancel', n) from unnest(_notes) n;
    elsif _action = 'delete' then
        with gone as (
            delete from queues.task t where t.task_id = any (_locked)
            returning t.task_id, t.status, t.attempt
        ), ev as (
            insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail, actor)
            select g.task_id, 'deleted', g.status, null, null, session_user, g.attempt,
                   'deleted by hand: the task and its errors; its leases and events stay until their day is dropped', _actor
            from gone g
        )
        select array_agg(g.task_id order by g.task_id), array_agg(g.status order by g.task_id) into _done, _from from gone g;
        -- Errors go with their task, as retention deletes them (error_task_id_idx).
        delete from queues.error e where e.task_id = any (_done);
    end if;
    return query select d.id, d.st from unnest(_done, _from) as d(id, st);
end $$;
revoke all on function internal.apply_task_action(text, bigint[], queues.task_status[], text, text) from public;
