-- Makes instance _id due by _at and wakes the supervisor by then (queues.wake_supervisor): the one
-- way anything but the supervisor asks it to look at an instance.
create or replace function comms.wake_send_email(_id bigint, _at timestamptz default now()) returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    _at := coalesce(_at, now());
    insert into comms.send_email_due as d (send_email_task_id, due_at) values (_id, _at)
    on conflict (send_email_task_id) do update set due_at = least(d.due_at, excluded.due_at);
    perform queues.wake_supervisor('comms.send_email_supervisor', _at);
end $$;
revoke all on function comms.wake_send_email(bigint, timestamp with time zone) from public;
