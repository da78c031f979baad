-- A durable Go workflow's wait for signal (_name, _key) at position _seq, named _call, under the
-- task's lease (docs/workflows.md, "Waiting for a signal"). Under the signal's lock (the one
-- queues.signal takes), in one transaction:
--   received:   the signal has arrived: its payload is recorded at _seq and returned;
--   timed_out:  it has not, and _deadline has passed: that is recorded at _seq, for good (a later
--               signal changes nothing of this run's history);
--   waiting:    neither: the task is registered as waiting for the signal and snoozed until
--               _deadline, without spending the attempt (queues.snooze_task); queues.signal makes
--               it due at once. Both in the one transaction, so a signal cannot fall between;
--   lease_lost: the lease is not the task's current one: nothing written.
create or replace function queues.await_workflow_signal(
    _task_id bigint, _lease_id bigint, _seq integer, _name text, _key text, _deadline timestamptz)
returns table (outcome text, payload jsonb)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _payload jsonb;
    _recorded boolean;
begin
    perform internal.check_signal_key('await_workflow_signal', _name, _key);
    perform internal.check_finite('await_workflow_signal', '_deadline', _deadline);
    perform internal.lock_signal(_name, _key);
    perform 1 from queues.task t
    where t.task_id = _task_id and t.lease_id = _lease_id and t.lease_expires_at is not null -- i.e. running
    for no key update;
    if not found then
        return query select 'lease_lost', null::jsonb;
        return;
    end if;
    select s.payload into _payload from queues.signal s where s.name = _name and s.key = _key;
    if found then
        select r.recorded into _recorded
        from queues.record_workflow_step(_task_id, _lease_id, _seq, 'signal', _name,
                                         jsonb_build_object('received', true, 'payload', _payload)) r;
        return query select case when _recorded then 'received' else 'lease_lost' end, _payload;
        return;
    end if;
    if clock_timestamp() >= _deadline then
        select r.recorded into _recorded
        from queues.record_workflow_step(_task_id, _lease_id, _seq, 'signal', _name, '{"received": false}') r;
        return query select case when _recorded then 'timed_out' else 'lease_lost' end, null::jsonb;
        return;
    end if;
    insert into queues.signal_wait (name, key, task_id) values (_name, _key, _task_id) on conflict do nothing;
    if not queues.snooze_task(_task_id, _lease_id, _deadline) then
        raise exception 'await_workflow_signal: task % lost its lease while locked', _task_id; -- cannot happen: locked above
    end if;
    return query select 'waiting', null::jsonb;
end $$;
revoke all on function queues.await_workflow_signal(bigint, bigint, integer, text, text, timestamptz) from public;
grant execute on function queues.await_workflow_signal(bigint, bigint, integer, text, text, timestamptz) to worker_service_user;
comment on function queues.await_workflow_signal(bigint, bigint, integer, text, text, timestamptz) is
    'A durable Go workflow''s wait for a signal under the task''s lease: received (recorded), timed_out (recorded), waiting (registered and snoozed until the deadline, in one transaction) or lease_lost.';
