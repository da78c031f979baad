-- Delay before retry number _attempt+1 after attempt _attempt failed: exponential backoff with
-- full jitter, uniform in [0, min(retry_backoff_max, retry_backoff_base * 2^attempt)); with the
-- defaults [0, min(1 hour, 2^attempt seconds)). (PL/pgSQL, so the settings query is planned once
-- per session.)
create or replace function queues.retry_delay(_attempt integer) returns interval
language plpgsql volatile parallel safe as $$
begin
    return (select make_interval(secs => random() * least(extract(epoch from s.retry_backoff_max),
                                                         extract(epoch from s.retry_backoff_base)
                                                           * power(2.0, least(greatest(_attempt, 1), 30))))
            from queues.settings s where s.singleton);
end $$;
revoke all on function queues.retry_delay(integer) from public;
