-- queues.record_outbox_messages records many outbox deliveries at once, each exactly as
-- queues.record_outbox_message would (its rules included), in the order given: one row
-- (i, result) each. A worker's dev outbox provider sends its concurrent calls through it, one
-- statement and one commit for all (docs/providers.md). Anything that raises aborts the whole
-- call; the provider then records each on its own.
create or replace function queues.record_outbox_messages(_task_ids bigint[], _channels text[], _requests jsonb[])
returns table (ord integer, result jsonb)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $fn$
declare
    _n integer := coalesce(cardinality(_channels), 0);
begin
    if coalesce(cardinality(_task_ids), 0) <> _n or coalesce(cardinality(_requests), 0) <> _n then
        raise exception 'record_outbox_messages: % task ids, % channels and % requests; expected one of each per message',
            coalesce(cardinality(_task_ids), 0), _n, coalesce(cardinality(_requests), 0)
            using errcode = 'invalid_parameter_value';
    end if;
    for _i in 1 .. _n loop
        ord := _i;
        result := queues.record_outbox_message(_task_ids[_i], _channels[_i], _requests[_i]);
        return next;
    end loop;
end $fn$;
revoke all on function queues.record_outbox_messages(bigint[], text[], jsonb[]) from public;
grant execute on function queues.record_outbox_messages(bigint[], text[], jsonb[]) to worker_service_user;
comment on function queues.record_outbox_messages(bigint[], text[], jsonb[]) is 'queues.record_outbox_message for many messages in one call, in order; (i, result) rows. See docs/providers.md.';
