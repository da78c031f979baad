-- Operators' task actions, by id or by filter, recorded with who did them
-- (docs/operations.md, "Runbook"; docs/sql.md, "Operators' actions").
--
-- queues.retry_tasks, cancel_tasks and delete_tasks act on up to 1,000 tasks named by id;
-- queues.retry_tasks_matching, cancel_tasks_matching and delete_tasks_matching on up to 1,000
-- tasks a filter matches, after a cursor (_after_task_id), so that a caller loops over any number
-- of tasks in short transactions: each call returns the last task id it looked at, and the next
-- call starts after it. queues.count_tasks_matching says how many tasks such a loop would act on
-- (a dry run). A procedure that commits between batches cannot be SECURITY DEFINER: the loop is
-- the caller's (the CLI's, the dashboard's, or a psql DO-less loop of statements).
--
-- Locks (docs/design.md, "Which statement locks what"): every call locks the tasks it acts on in
-- task_id order with SKIP LOCKED, FOR NO KEY UPDATE to retry or cancel, FOR UPDATE to delete, and
-- holds them for that one statement's transaction. It never waits: a task whose row another
-- transaction holds (its completion committing, a db_function's FOR KEY SHARE for a delete) is
-- skipped and reported ("busy" by id, "skipped" by filter); running the action again takes it.
--
-- Each task acted on gets an event row with the new column queues.task_event.actor: who did it
-- (the dashboard's signed-in name, the CLI's --actor; the database role when none is given).
-- worker_id keeps the database role, as queues.retry_task and cancel_task record it.
--
-- What delete means: only finished tasks (completed, failed, dead, cancelled) are deleted, never
-- a pending or running one (cancel it first). The task row goes with its error rows and signal
-- waits, as retention deletes it (queues.prune_finished); its lease and event history stays in
-- its day partitions until the leader drops the day, and a 'deleted' event with the actor is
-- added there, so that who deleted task 42 can still be found. Its idempotency key is free again.
--
-- Granted to nobody, the worker role included: grant them to an operator's role
-- (docs/security.md, "An operator's role").

-- Adding a nullable column without a default changes the catalog only, but takes the table's
-- (and each partition's) exclusive lock for a moment, behind any transaction that has written an
-- event and not committed (a long db_function's): waiting longer than 5 seconds fails the
-- migration, which is then run again, instead of stalling every worker behind it.
set local lock_timeout = '5s';
alter table queues.task_event add column actor text;
reset lock_timeout;
comment on column queues.task_event.actor is
    'Who did it, for an operator''s action (retried, cancelled, deleted by hand through queues.retry_tasks, cancel_tasks, delete_tasks and their _matching forms): the dashboard''s signed-in name or the CLI''s --actor, else the database role. NULL for what workers and the leader do.';

-- The actor recorded for an operator's action: _actor trimmed, or the database role when it is
-- NULL or blank. At most 200 characters, no control characters.
create function internal.operator_actor(_label text, _actor text)
returns text
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
begin
    if _actor is null or btrim(_actor) = '' then
        return session_user::text;
    end if;
    if length(btrim(_actor)) > 200 or _actor ~ '[[:cntrl:]]' then
        raise exception '%: _actor must be at most 200 characters without control characters, got %', _label,
            to_jsonb(left(_actor, 210))::text using errcode = 'invalid_parameter_value';
    end if;
    return btrim(_actor);
end $$;
revoke all on function internal.operator_actor(text, text) from public;

-- The statuses each action takes a task from.
create function internal.task_action_statuses(_action text)
returns queues.task_status[]
language sql immutable set search_path = pg_catalog, pg_temp as $$
    select case _action
        when 'retry' then '{dead,failed,cancelled}'::queues.task_status[]
        when 'cancel' then '{pending,running,failed,dead}'::queues.task_status[]
        when 'delete' then '{completed,failed,dead,cancelled}'::queues.task_status[]
    end
$$;
revoke all on function internal.task_action_statuses(text) from public;

-- Checks a filter for action (retry, cancel, delete) and returns the statuses it matches: the
-- ones given, or every status the action takes a task from. At least one condition is needed;
-- a status the action does not take, or a finish-time bound with a status that has no finish
-- time, is refused (22023), naming the argument.
create function internal.check_task_filter(
    _label text, _action text, _statuses queues.task_status[], _task_types text[], _idempotency_key text,
    _enqueued_since timestamptz, _enqueued_until timestamptz, _finished_since timestamptz, _finished_until timestamptz)
returns queues.task_status[]
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
declare
    _allowed queues.task_status[] := internal.task_action_statuses(_action);
    _bad queues.task_status;
    _type text;
begin
    if _allowed is null then
        raise exception '%: unknown action %', _label, quote_nullable(_action) using errcode = 'invalid_parameter_value';
    end if;
    if _statuses is not null and (cardinality(_statuses) = 0 or array_position(_statuses, null) is not null) then
        raise exception '%: _statuses must be NULL or a list of statuses without NULL, got %', _label, _statuses
            using errcode = 'invalid_parameter_value';
    end if;
    select s into _bad from unnest(_statuses) s where s <> all (_allowed) limit 1;
    if found then
        raise exception '%: _statuses: % acts on % tasks, not %', _label, _action, array_to_string(_allowed, ', '), _bad
            using errcode = 'invalid_parameter_value';
    end if;
    if _task_types is not null then
        if cardinality(_task_types) not between 1 and 100 then
            raise exception '%: _task_types must be NULL or 1 to 100 task types, got %', _label, cardinality(_task_types)
                using errcode = 'invalid_parameter_value';
        end if;
        foreach _type in array _task_types loop
            if _type is null or _type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(_type) > 128 then
                raise exception '%: _task_types: % is not a task type', _label, coalesce(quote_literal(left(_type, 140)), 'NULL')
                    using errcode = 'invalid_parameter_value';
            end if;
        end loop;
    end if;
    if _idempotency_key is not null and length(_idempotency_key) not between 1 and 512 then
        raise exception '%: _idempotency_key must be 1 to 512 characters, got %', _label, length(_idempotency_key)
            using errcode = 'invalid_parameter_value';
    end if;
    perform internal.check_finite(_label, '_enqueued_since', _enqueued_since);
    perform internal.check_finite(_label, '_enqueued_until', _enqueued_until);
    perform internal.check_finite(_label, '_finished_since', _finished_since);
    perform internal.check_finite(_label, '_finished_until', _finished_until);
    if _enqueued_since >= _enqueued_until then
        raise exception '%: _enqueued_since (%) must be before _enqueued_until (%)', _label, _enqueued_since, _enqueued_until
            using errcode = 'invalid_parameter_value';
    end if;
    if _finished_since >= _finished_until then
        raise exception '%: _finished_since (%) must be before _finished_until (%)', _label, _finished_since, _finished_until
            using errcode = 'invalid_parameter_value';
    end if;
    if _statuses is null and _task_types is null and _idempotency_key is null and _enqueued_since is null
       and _enqueued_until is null and _finished_since is null and _finished_until is null then
        raise exception '%: give at least one condition (_statuses, _task_types, _idempotency_key, _enqueued_since, _enqueued_until, _finished_since, _finished_until)', _label
            using errcode = 'invalid_parameter_value';
    end if;
    if coalesce(_finished_since, _finished_until) is not null then
        select s into _bad from unnest(_statuses) s where s in ('pending', 'running') limit 1;
        if found then
            raise exception '%: _finished_since and _finished_until match finished tasks only; % tasks have no finish time (filter on _enqueued_since or _enqueued_until)',
                _label, _bad using errcode = 'invalid_parameter_value';
        end if;
        _allowed := array(select s from unnest(_allowed) s where s not in ('pending', 'running'));
    end if;
    return coalesce(_statuses, _allowed);
end $$;
revoke all on function internal.check_task_filter(text, text, queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz) from public;

-- The ids of the tasks a filter matches, after _after_task_id, in id order, at most _limit (NULL:
-- all). Custom plans: each call is planned for its own statuses and bounds, so a rare status is
-- read through its partial index (task_needs_attention_idx for failed and dead tasks, ordered by
-- id) and a finish-time window through task_finished_idx.
create function internal.matching_tasks(
    _statuses queues.task_status[], _task_types text[], _idempotency_key text,
    _enqueued_since timestamptz, _enqueued_until timestamptz, _finished_since timestamptz, _finished_until timestamptz,
    _after_task_id bigint, _limit integer)
returns setof bigint
language plpgsql stable set search_path = pg_catalog, pg_temp set plan_cache_mode = force_custom_plan set jit = off as $$
begin
    return query
    select t.task_id
    from queues.task t
    where t.status = any (_statuses)
      and (_task_types is null or t.task_type = any (_task_types))
      and (_idempotency_key is null or t.idempotency_key = _idempotency_key)
      and (_enqueued_since is null or t.enqueued_at >= _enqueued_since)
      and (_enqueued_until is null or t.enqueued_at < _enqueued_until)
      and (_finished_since is null or (t.status in ('completed', 'cancelled', 'failed', 'dead')
                                       and greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at) >= _finished_since))
      and (_finished_until is null or (t.status in ('completed', 'cancelled', 'failed', 'dead')
                                       and greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at) < _finished_until))
      and t.task_id > _after_task_id
    order by t.task_id
    limit _limit;
end $$;
revoke all on function internal.matching_tasks(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer) from public;

-- Applies action to the tasks of _ids that are in one of _statuses, locking them in id order and
-- skipping any row another transaction holds (jit off: the retry's subplans make the planner
-- expect a costly statement, and JIT compiled it for a second per batch of 500 that runs in 10 ms);
-- returns the tasks acted on, with the status each
-- had. Retry: pending, due now, attempts reset (a pending task keeps its attempts and is made
-- due now), its limit bucket set again, as queues.retry_task does; a dead task whose debounce
-- key a pending task holds stays (the pending one is the debounced task). Cancel: cancelled,
-- its worker told at commit (taskorch_cancel), as queues.cancel_task does. Delete: the row and
-- its error rows. Each gets an event with the actor.
create function internal.apply_task_action(_action text, _ids bigint[], _statuses queues.task_status[], _actor text, _reason text)
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
                               where p.task_type = t.task_type and p.debounce_key = t.debounce_key and p.status = 'pending')
                   and t.task_id = (select min(q.task_id) from queues.task q
                                    where q.task_id = any (_locked) and q.task_type = t.task_type
                                      and q.debounce_key = t.debounce_key)))
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

-- The distinct ids of an id list, checked: 1 to 1,000 positive ids.
create function internal.check_task_ids(_label text, _task_ids bigint[])
returns bigint[]
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
declare
    _ids bigint[];
begin
    if _task_ids is null or cardinality(_task_ids) = 0 then
        raise exception '%: _task_ids must name at least one task', _label using errcode = 'invalid_parameter_value';
    end if;
    if exists (select from unnest(_task_ids) i where i is null or i <= 0) then
        raise exception '%: _task_ids must be positive task ids, got %', _label,
            (select coalesce(i::text, 'NULL') from unnest(_task_ids) i where i is null or i <= 0 limit 1)
            using errcode = 'invalid_parameter_value';
    end if;
    _ids := array(select distinct i from unnest(_task_ids) i order by i);
    if cardinality(_ids) > 1000 then
        raise exception '%: _task_ids names % tasks; at most 1,000 a call', _label, cardinality(_ids)
            using errcode = 'invalid_parameter_value';
    end if;
    return _ids;
end $$;
revoke all on function internal.check_task_ids(text, bigint[]) from public;

-- By id: what became of each task named, in id order. outcome: done; unchanged (cancelling a
-- cancelled task); not_found; wrong_state (its status forbids the action: status says which);
-- busy (another transaction holds its row: try again); conflict (retry: a pending task holds its
-- debounce key).
create function internal.task_action_by_id(_label text, _action text, _task_ids bigint[], _actor text, _reason text)
returns table (task_id bigint, outcome text, status queues.task_status)
language plpgsql set search_path = pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    _ids bigint[] := internal.check_task_ids(_label, _task_ids);
    _statuses queues.task_status[] := internal.task_action_statuses(_action);
    _done bigint[];
begin
    _actor := internal.operator_actor(_label, _actor);
    if _action = 'retry' then
        _statuses := _statuses || 'pending'::queues.task_status; -- made due now, as queues.retry_task does
    end if;
    _done := array(select a.task_id from internal.apply_task_action(_action, _ids, _statuses, _actor, _reason) a);
    return query
    select i.id,
           case when i.id = any (_done) then 'done'
                when t.task_id is null then 'not_found'
                when _action = 'cancel' and t.status = 'cancelled' then 'unchanged'
                when t.status <> all (_statuses) then 'wrong_state'
                when _action = 'retry' and t.debounce_key is not null and exists (
                    select from queues.task p
                    where p.task_type = t.task_type and p.debounce_key = t.debounce_key and p.status = 'pending'
                      and p.task_id <> t.task_id) then 'conflict'
                else 'busy' end,
           t.status
    from unnest(_ids) as i(id)
    left join queues.task t on t.task_id = i.id
    order by i.id;
end $$;
revoke all on function internal.task_action_by_id(text, text, bigint[], text, text) from public;

-- By filter: one batch of at most _batch matching tasks after _after_task_id. matched: the tasks
-- the batch looked at (fewer than _batch: the filter has no more after them); done: acted on;
-- skipped: matched but not acted on (another transaction held the row, or it changed meanwhile);
-- last_task_id: the cursor for the next call (NULL when nothing matched).
create function internal.task_action_batch(
    _label text, _action text, _statuses queues.task_status[], _task_types text[], _idempotency_key text,
    _enqueued_since timestamptz, _enqueued_until timestamptz, _finished_since timestamptz, _finished_until timestamptz,
    _after_task_id bigint, _batch integer, _actor text, _reason text)
returns table (matched integer, done integer, skipped integer, last_task_id bigint)
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
    _st queues.task_status[];
    _ids bigint[];
    _n integer;
begin
    _st := internal.check_task_filter(_label, _action, _statuses, _task_types, _idempotency_key,
                                      _enqueued_since, _enqueued_until, _finished_since, _finished_until);
    if _after_task_id is null or _after_task_id < 0 then
        raise exception '%: _after_task_id must be 0 (from the start) or a task id, got %', _label, coalesce(_after_task_id::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _batch is null or _batch not between 1 and 1000 then
        raise exception '%: _batch must be between 1 and 1000, got %', _label, coalesce(_batch::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    _actor := internal.operator_actor(_label, _actor);
    _ids := array(select m from internal.matching_tasks(_st, _task_types, _idempotency_key, _enqueued_since, _enqueued_until,
                                                         _finished_since, _finished_until, _after_task_id, _batch) m);
    if cardinality(_ids) = 0 then
        return query select 0, 0, 0, null::bigint;
        return;
    end if;
    select count(*) into _n from internal.apply_task_action(_action, _ids, _st, _actor, _reason);
    return query select cardinality(_ids), _n, cardinality(_ids) - _n, _ids[cardinality(_ids)];
end $$;
revoke all on function internal.task_action_batch(text, text, queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text, text) from public;

-- The public functions.

create function queues.retry_tasks(_task_ids bigint[], _actor text default null)
returns table (task_id bigint, outcome text, status queues.task_status)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_by_id('retry_tasks', 'retry', _task_ids, _actor, null)
$$;
revoke all on function queues.retry_tasks(bigint[], text) from public;
comment on function queues.retry_tasks(bigint[], text) is
    'Puts up to 1,000 dead, failed or cancelled tasks back to pending, due now, attempts reset (a pending one is made due now), recording _actor (default: the database role) in each task''s retried event; one row per task: done, not_found, wrong_state, busy (its row is locked: try again) or conflict (a pending task holds its debounce key). Never waits for a lock.';

create function queues.cancel_tasks(_task_ids bigint[], _actor text default null, _reason text default null)
returns table (task_id bigint, outcome text, status queues.task_status)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_by_id('cancel_tasks', 'cancel', _task_ids, _actor, _reason)
$$;
revoke all on function queues.cancel_tasks(bigint[], text, text) from public;
comment on function queues.cancel_tasks(bigint[], text, text) is
    'Cancels up to 1,000 pending, running, failed or dead tasks (a running task''s worker is told at commit), recording _actor and _reason in each task''s cancelled event; one row per task: done, unchanged (already cancelled), not_found, wrong_state (completed) or busy (its row is locked: try again). Never waits for a lock.';

create function queues.delete_tasks(_task_ids bigint[], _actor text default null)
returns table (task_id bigint, outcome text, status queues.task_status)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_by_id('delete_tasks', 'delete', _task_ids, _actor, null)
$$;
revoke all on function queues.delete_tasks(bigint[], text) from public;
comment on function queues.delete_tasks(bigint[], text) is
    'Deletes up to 1,000 finished (completed, failed, dead, cancelled) tasks with their error rows, never a pending or running one (wrong_state: cancel it first); a deleted event with _actor stays in the history until its day is dropped. One row per task: done, not_found, wrong_state or busy. Never waits for a lock.';

create function queues.retry_tasks_matching(
    _statuses queues.task_status[] default null, _task_types text[] default null, _idempotency_key text default null,
    _enqueued_since timestamptz default null, _enqueued_until timestamptz default null,
    _finished_since timestamptz default null, _finished_until timestamptz default null,
    _after_task_id bigint default 0, _batch integer default 500, _actor text default null)
returns table (matched integer, done integer, skipped integer, last_task_id bigint)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_batch('retry_tasks_matching', 'retry', _statuses, _task_types, _idempotency_key,
        _enqueued_since, _enqueued_until, _finished_since, _finished_until, _after_task_id, _batch, _actor, null)
$$;
revoke all on function queues.retry_tasks_matching(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text) from public;
comment on function queues.retry_tasks_matching(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text) is
    'One batch of a retry by filter: the dead, failed or cancelled tasks (or _statuses among them) matching the filter, after _after_task_id, at most _batch (1 to 1,000); call again with _after_task_id => last_task_id until matched < _batch. Enqueue and finish times: since inclusive, until exclusive.';

create function queues.cancel_tasks_matching(
    _statuses queues.task_status[] default null, _task_types text[] default null, _idempotency_key text default null,
    _enqueued_since timestamptz default null, _enqueued_until timestamptz default null,
    _finished_since timestamptz default null, _finished_until timestamptz default null,
    _after_task_id bigint default 0, _batch integer default 500, _actor text default null, _reason text default null)
returns table (matched integer, done integer, skipped integer, last_task_id bigint)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_batch('cancel_tasks_matching', 'cancel', _statuses, _task_types, _idempotency_key,
        _enqueued_since, _enqueued_until, _finished_since, _finished_until, _after_task_id, _batch, _actor, _reason)
$$;
revoke all on function queues.cancel_tasks_matching(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text, text) from public;
comment on function queues.cancel_tasks_matching(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text, text) is
    'One batch of a cancel by filter: the pending, running, failed or dead tasks (or _statuses among them) matching the filter; see retry_tasks_matching for the loop.';

create function queues.delete_tasks_matching(
    _statuses queues.task_status[] default null, _task_types text[] default null, _idempotency_key text default null,
    _enqueued_since timestamptz default null, _enqueued_until timestamptz default null,
    _finished_since timestamptz default null, _finished_until timestamptz default null,
    _after_task_id bigint default 0, _batch integer default 500, _actor text default null)
returns table (matched integer, done integer, skipped integer, last_task_id bigint)
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select * from internal.task_action_batch('delete_tasks_matching', 'delete', _statuses, _task_types, _idempotency_key,
        _enqueued_since, _enqueued_until, _finished_since, _finished_until, _after_task_id, _batch, _actor, null)
$$;
revoke all on function queues.delete_tasks_matching(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text) from public;
comment on function queues.delete_tasks_matching(queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz, bigint, integer, text) is
    'One batch of a delete by filter: the completed, failed, dead or cancelled tasks (or _statuses among them) matching the filter; see retry_tasks_matching for the loop and delete_tasks for what a delete removes.';

create function queues.count_tasks_matching(
    _action text, _statuses queues.task_status[] default null, _task_types text[] default null, _idempotency_key text default null,
    _enqueued_since timestamptz default null, _enqueued_until timestamptz default null,
    _finished_since timestamptz default null, _finished_until timestamptz default null)
returns bigint
language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
declare
    _st queues.task_status[];
begin
    _st := internal.check_task_filter('count_tasks_matching', _action, _statuses, _task_types, _idempotency_key,
                                      _enqueued_since, _enqueued_until, _finished_since, _finished_until);
    return (select count(*) from internal.matching_tasks(_st, _task_types, _idempotency_key, _enqueued_since, _enqueued_until,
                                                          _finished_since, _finished_until, 0, null));
end $$;
revoke all on function queues.count_tasks_matching(text, queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz) from public;
comment on function queues.count_tasks_matching(text, queues.task_status[], text[], text, timestamptz, timestamptz, timestamptz, timestamptz) is
    'How many tasks _action (retry, cancel or delete) would act on with this filter now: a dry run of the _matching functions (a task whose row is locked then may still be skipped). Reads, locks nothing.';
