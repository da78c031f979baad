-- Gives every waiting, pending and running task that the limit _limit_name could govern its
-- limit and bucket as the limits now are (none: NULL). Waiting tasks (workflow children whose
-- parents have not ended) are re-keyed too: they become pending as they are, so one released
-- after a change must already carry the limit in force. Holds queues.task in SHARE ROW EXCLUSIVE mode until
-- the caller commits, so that no insert made under the old limit commits after this: writers wait
-- for the change (at most 5 seconds are spent waiting for writers already in flight).
create or replace function internal.rekey_limited_tasks(_limit_name text)
returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _timeout text := current_setting('lock_timeout');
begin
    begin
        perform set_config('lock_timeout', '5s', true);
        lock table queues.task in share row exclusive mode;
    exception when lock_not_available then
        raise exception 'limits: queues.task is held by a long transaction; the limit % was not changed, try again', _limit_name
            using errcode = 'lock_not_available';
    end;
    perform set_config('lock_timeout', _timeout, true);
    update queues.task t
    set limit_name = l.task_type,
        limit_key = case when l.task_type is not null then internal.limit_key(l.key_field, t.payload) end
    from queues.task o
    cross join lateral (select * from internal.limit_of(o.task_type, o.payload)) l
    where o.task_id = t.task_id
      and o.task_type = internal.limit_task_type(_limit_name)
      and o.status in ('waiting', 'pending', 'running')
      and (o.limit_name, o.limit_key) is distinct from
          (l.task_type, case when l.task_type is not null then internal.limit_key(l.key_field, o.payload) end);
end $$;
revoke all on function internal.rekey_limited_tasks(text) from public;
