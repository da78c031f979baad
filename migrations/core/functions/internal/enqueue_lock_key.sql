-- The advisory lock key every enqueue holds shared until its transaction ends (taken by the
-- trigger internal.task_inserted); queues.worker_waiting tries it exclusively to learn
-- whether an enqueue is in flight (docs/design.md, "Enqueue").
create or replace function internal.enqueue_lock_key() returns bigint
language sql immutable parallel safe as $$ select -7863903173047144394::bigint $$;
comment on function internal.enqueue_lock_key() is
    'The advisory lock (one bigint key: hashtextextended(''taskorch.enqueue_in_flight'', 0)) every enqueue holds shared until its transaction ends; queues.worker_waiting tries it exclusively.';
revoke all on function internal.enqueue_lock_key() from public;
