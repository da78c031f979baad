-- Makes pending tasks due now (those not due yet), records why in their history and wakes the
-- workers. Returns how many it moved.
create or replace function internal.wake_signal_waiters(_task_ids bigint[], _name text, _key text) returns integer
language plpgsql volatile set search_path = pg_catalog, pg_temp as $$
declare
    _n integer;
begin
    with woken as (
        update queues.task t set run_at = now()
        where t.task_id = any (_task_ids) and t.status = 'pending' and t.run_at > now()
        returning t.task_id, t.attempt
    ), logged as (
        insert into queues.task_event (task_id, event, from_status, to_status, worker_id, attempt, detail)
        select w.task_id, 'signalled', 'pending', 'pending', session_user, w.attempt,
               format('made due by signal %s key %s', quote_literal(_name), quote_literal(left(_key, 140)))
        from woken w
        returning 1
    )
    select count(*)::integer into _n from logged;
    if _n > 0 then
        perform pg_notify('taskorch_task', '');
    end if;
    return _n;
end $$;
revoke all on function internal.wake_signal_waiters(bigint[], text, text) from public;
