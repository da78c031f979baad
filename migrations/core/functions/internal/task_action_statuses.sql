-- The statuses each action takes a task from.
create or replace function internal.task_action_statuses(_action text)
returns queues.task_status[]
language sql immutable set search_path = pg_catalog, pg_temp as $$
    select case _action
        when 'retry' then '{dead,failed,cancelled}'::queues.task_status[]
        when 'cancel' then '{waiting,pending,running,failed,dead}'::queues.task_status[]
        when 'delete' then '{completed,failed,dead,cancelled}'::queues.task_status[]
    end
$$;
revoke all on function internal.task_action_statuses(text) from public;
