-- Tasks that wait for other tasks (docs/workflows.md, docs/design.md "Tasks that wait for
-- tasks").
--
-- A task enqueued with _after names its parents. Its definition is on its row (after_ids, every
-- parent named; on_parent_failure, 'cancel' or 'run'). Its progress is hot state kept apart from
-- any parent's row: one queues.task_edge row per parent that had not ended when it was named
-- (deleted when that parent's end is counted: the delete is what makes each count happen once),
-- and counters in queues.task_wait_stripe. A child with k unresolved parents has ceil(sqrt(k))
-- stripes when k > 16 (else one); each parent's end decrements its stripe, and the parent whose
-- decrement empties a stripe decrements the child's waiting_stripes; the one that empties the
-- last stripe releases the child. So a fan-in of 1,000 has no row that every parent's completion
-- updates: a stripe row sees about 32 of them, the child's row 32 stripe-finishers.
--
-- The release happens in the transaction that ends the parent. A completion (the hot path:
-- queues.complete_tasks_with_results, complete_failed_call) calls internal.resolve_parents itself
-- after one probe of task_edge for its batch. Every other end (failed, dead, cancelled: fail_task,
-- rescue_expired_leases, reap_dead_workers, cancel_task, the bulk actions, ...) goes through
-- queues.task's row trigger task_parent_ended, which notes a task that ends so and has children;
-- the statement trigger task_parents_resolve then counts them for every child, cancelling or
-- releasing the children, transitively. internal.resolve_parents locks in child and stripe
-- order, so concurrent completions lock in one order. A refused stale completion updates no row and releases nothing.
-- A child named while its parent's completion commits: the deferred constraint trigger
-- task_edge_parent_check re-reads the parent FOR SHARE at the enqueuer's commit and counts a
-- parent that ended meanwhile (exactly one side deletes the edge).

alter table queues.task
    add column after_ids bigint[],
    add column on_parent_failure text,
    add column waiting_stripes integer,
    add constraint task_on_parent_failure_valid check (on_parent_failure in ('cancel', 'run'));
comment on column queues.task.after_ids is
    'The parents named at enqueue (queues.enqueue''s _after), in id order without duplicates; NULL: none.';
comment on column queues.task.on_parent_failure is
    'What a parent that ends failed, dead or cancelled does to this task: cancel (it, and its own waiting children) or run (it counts as ended). NULL: no parents.';
comment on column queues.task.waiting_stripes is
    'While waiting: how many of its queues.task_wait_stripe counters have not reached 0.';

create table queues.task_edge (
    parent_id bigint not null,
    child_id bigint not null,
    stripe integer not null,
    primary key (parent_id, child_id)
);
comment on table queues.task_edge is
    'One row per (parent, waiting child) whose parent had not ended when the child named it; deleted when the parent''s end is counted.';
create index task_edge_child_idx on queues.task_edge (child_id);

create table queues.task_wait_stripe (
    child_id bigint not null,
    stripe integer not null,
    pending integer not null check (pending >= 0),
    primary key (child_id, stripe)
) with (fillfactor = 70);
comment on table queues.task_wait_stripe is
    'A waiting task''s counters: how many of its parents of each stripe have not ended. Deleted with the release or cancellation.';

create index task_waiting_idx on queues.task (task_type) where status = 'waiting';

\ir functions/internal/resolve_parents.sql
\ir functions/internal/note_ended_parent.sql
\ir functions/internal/resolve_ended_parents.sql
\ir functions/internal/check_edge_parent.sql
\ir functions/internal/forget_parents.sql

create trigger task_parent_ended
after update of status on queues.task
for each row
when (old.status in ('waiting', 'pending', 'running') and new.status in ('failed', 'dead', 'cancelled'))
execute function internal.note_ended_parent();

create trigger task_parents_resolve
after update of status on queues.task
for each statement
execute function internal.resolve_ended_parents();

create trigger task_parents_forget
after delete on queues.task
for each row
when (old.after_ids is not null)
execute function internal.forget_parents();

create constraint trigger task_edge_parent_check
after insert on queues.task_edge
deferrable initially deferred
for each row
execute function internal.check_edge_parent();

-- queues.enqueue, enqueue_with_result, insert_task, enqueue_many, enqueue_many_with_result and
-- insert_tasks take _after and _on_parent_failure (at the end, with defaults: every call that
-- worked before works the same). Their old signatures are dropped; the roles granted them are
-- granted the new ones.
create temporary table enqueue_grantees on commit drop as
select distinct a.grantee::regrole::text as role
from pg_catalog.pg_proc p
cross join lateral aclexplode(p.proacl) a
where p.pronamespace = 'queues'::regnamespace
  and p.proname in ('enqueue', 'enqueue_with_result', 'insert_task', 'enqueue_many', 'enqueue_many_with_result', 'insert_tasks')
  and a.privilege_type = 'EXECUTE'
  and a.grantee <> 0
  and a.grantee <> p.proowner;

drop function if exists queues.enqueue(text, jsonb, timestamptz, integer, text, integer);
drop function if exists queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer);
drop function if exists queues.insert_task(text, jsonb, timestamptz, integer, text, integer);
drop function if exists queues.enqueue_many(text[], jsonb[], timestamptz[], integer[], text[], integer[]);
drop function if exists queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[]);
drop function if exists queues.insert_tasks(text[], jsonb[], timestamptz[], integer[], text[], integer[]);

\ir functions/internal/check_parents_input.sql
\ir functions/internal/attach_parents.sql
\ir functions/queues/insert_task.sql
\ir functions/queues/enqueue.sql
\ir functions/queues/enqueue_with_result.sql
\ir functions/queues/insert_tasks.sql
\ir functions/queues/enqueue_many.sql
\ir functions/queues/enqueue_many_with_result.sql

do $$
declare
    _r record;
begin
    for _r in select role from enqueue_grantees loop
        execute format('grant execute on function
            queues.enqueue(text, jsonb, timestamptz, integer, text, integer, bigint[], text),
            queues.enqueue_with_result(text, jsonb, timestamptz, integer, text, integer, bigint[], text),
            queues.insert_task(text, jsonb, timestamptz, integer, text, integer, bigint[], text),
            queues.enqueue_many(text[], jsonb[], timestamptz[], integer[], text[], integer[], bigint[], text),
            queues.enqueue_many_with_result(text[], jsonb[], timestamptz[], integer[], text[], integer[], bigint[], text),
            queues.insert_tasks(text[], jsonb[], timestamptz[], integer[], text[], integer[], bigint[], text) to %s', _r.role);
    end loop;
end $$;
