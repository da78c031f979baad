-- The default number of attempts a task gets (the first run included).
create or replace function queues.default_max_attempts() returns integer
language sql immutable parallel safe as $$ select 25 $$;
revoke all on function queues.default_max_attempts() from public;
