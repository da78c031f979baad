create or replace function comms.send_email_task_failed_run() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
    new.run := comms.send_email_run(new.send_email_task_id);
    return new;
end $$;
revoke all on function comms.send_email_task_failed_run() from public;
