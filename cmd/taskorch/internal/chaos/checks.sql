-- The checker's queries (checker.go). Each check starts with a line
--   -- check: NAME KIND
-- (KIND: lost, duplicate, unexplained or info), then one comment line saying what it finds,
-- then a query returning one column: the ids (task, key or process) it found. The checker
-- counts them and shows a few.

-- check: not_terminal lost
-- Tasks still waiting, pending or running after the drain: every task must end completed, failed, dead or cancelled (a waiting one was never released).
select task_id from queues.task where status in ('waiting', 'pending', 'running');

-- check: workflow_node_not_completed lost
-- A workflow node (chaos-w*) that did not complete: every node of every diamond and chain must run, none be cancelled.
select task_id from queues.task where idempotency_key like 'chaos-w%' and status <> 'completed';

-- check: workflow_incomplete lost
-- A workflow without all its nodes (a diamond, chaos-wd*, has 4; a chain, chaos-wc*, 3).
select split_part(idempotency_key, '.', 1)
from queues.task
where idempotency_key like 'chaos-w%'
group by 1
having count(*) <> case when split_part(idempotency_key, '.', 1) like 'chaos-wd%' then 4 else 3 end;

-- check: workflow_nodes_rerun info
-- Workflow nodes claimed more than once: a fault (a kill, a pause, a restart) ended an attempt of theirs, and they still ran once.
select t.task_id from queues.task t where t.idempotency_key like 'chaos-w%'
  and (select count(*) from queues.task_lease l where l.task_id = t.task_id) > 1;

-- check: workflow_child_before_parent duplicate
-- A workflow node whose effect was recorded before one of its parents' (chaos.effect's identity order): a child ran before its parents completed.
select c.task_id
from queues.task c
cross join lateral unnest(c.after_ids) as p(id)
join queues.task pt on pt.task_id = p.id
join chaos.effect ce on ce.key = c.payload ->> 'key'
join chaos.effect pe on pe.key = pt.payload ->> 'key'
where c.idempotency_key like 'chaos-w%' and ce.effect_id < pe.effect_id;

-- check: durable_workflow_not_completed lost
-- A durable Go workflow (chaos.durable) that did not complete: every one must end completed (none failed, dead, cancelled or left waiting for its signal or child).
select task_id from queues.task where task_type = 'chaos.durable' and status <> 'completed';

-- check: durable_step_tx_missing lost
-- A completed durable workflow without the effect of one of its StepTx (effect-1, effect-2), as workload key:step.
select t.payload ->> 'key' || ':' || s.step
from queues.task t
cross join (values ('effect-1'), ('effect-2')) as s(step)
where t.task_type = 'chaos.durable' and t.status = 'completed'
  and not exists (select from chaos.durable_effect e where e.key = t.payload ->> 'key' and e.step = s.step);

-- check: durable_step_tx_twice duplicate
-- A StepTx effect committed more than once (chaos.durable_effect, by workload key:step): the effect and its checkpoint must commit together, once.
select key || ':' || step from chaos.durable_effect group by key, step having count(*) > 1;

-- check: durable_step_tx_without_checkpoint duplicate
-- A StepTx effect with no step_tx checkpoint of that name in queues.workflow_step: the effect committed without its checkpoint, so a re-run would apply it again.
select e.key || ':' || e.step
from chaos.durable_effect e
join queues.task t on t.task_type = 'chaos.durable' and t.idempotency_key = 'chaos-' || e.key
where not exists (select from queues.workflow_step w where w.task_id = t.task_id and w.kind = 'step_tx' and w.name = e.step);

-- check: durable_step_missing lost
-- A completed durable workflow one of whose Steps (step-1, step-2) never ran (no chaos.durable_step row), as workload key:step.
select t.payload ->> 'key' || ':' || s.step
from queues.task t
cross join (values ('step-1'), ('step-2')) as s(step)
where t.task_type = 'chaos.durable' and t.status = 'completed'
  and not exists (select from chaos.durable_step d where d.key = t.payload ->> 'key' and d.step = s.step);

-- check: durable_step_key_changed duplicate
-- A Step that ran under two StepKeys, or under a key other than the one its checkpoint recorded: every run of a step must carry the same key.
select key || ':' || step from chaos.durable_step group by key, step having count(distinct step_key) > 1
union
select d.key || ':' || d.step
from chaos.durable_step d
join queues.task t on t.task_type = 'chaos.durable' and t.idempotency_key = 'chaos-' || d.key
join queues.workflow_step w on w.task_id = t.task_id and w.kind = 'step' and w.name = d.step
where w.result #>> '{}' is distinct from d.step_key;

-- check: durable_child_missing lost
-- A completed durable workflow without its completed spawned child (a taskorch.sleep task whose payload names it in spawned_by).
select t.task_id
from queues.task t
where t.task_type = 'chaos.durable' and t.status = 'completed'
  and not exists (select from queues.task c where c.task_type = 'taskorch.sleep' and c.payload ->> 'spawned_by' = t.payload ->> 'key'
                  and c.status = 'completed');

-- check: durable_child_twice duplicate
-- A durable workflow whose Spawn enqueued more than one child (its workload key).
select payload ->> 'spawned_by' from queues.task
where task_type = 'taskorch.sleep' and payload ? 'spawned_by'
group by 1 having count(*) > 1;

-- check: durable_signal_not_received lost
-- A completed durable workflow whose last StepTx did not record its own signal's payload (AwaitSignal returned something else).
select t.task_id
from queues.task t
where t.task_type = 'chaos.durable' and t.status = 'completed'
  and not exists (select from chaos.durable_effect e where e.key = t.payload ->> 'key' and e.step = 'effect-2'
                  and e.payload ->> 'key' = t.payload ->> 'key');

-- check: durable_steps_rerun info
-- Steps that ran more than once (a fault fell between the step's effect and its checkpoint), each time with the same key: at least once.
select key || ':' || step from chaos.durable_step group by key, step having count(*) > 1;

-- check: durable_runs_cut info
-- Durable workflows a run of which a fault ended: a lease expired and rescued, or recovered from a dead worker.
select distinct e.task_id
from queues.task_event e
join queues.task t using (task_id)
where t.task_type = 'chaos.durable' and e.event in ('lease_expired', 'recovered');

-- check: completed_twice duplicate
-- Tasks completed more than once (chaos.completion, the fixture's trigger): completed under two leases.
select task_id from chaos.completion group by task_id having count(*) > 1;

-- check: completed_under_stale_lease duplicate
-- A completion under a lease that is not the task's current lease: an outcome applied under a lease that was taken over.
select c.task_id
from chaos.completion c
join queues.task t on t.task_id = c.task_id
where c.lease_id is distinct from t.lease_id;

-- check: completion_overwritten duplicate
-- A task that was completed and is no longer: a later outcome overwrote it.
select c.task_id
from chaos.completion c
join queues.task t on t.task_id = c.task_id
where t.status <> 'completed';

-- check: completed_without_lease lost
-- A completed task whose completing lease has no task_lease row, or no completion time: history lost.
select t.task_id
from queues.task t
where t.status = 'completed'
  and (t.completed_at is null
       or not exists (select from queues.task_lease l where l.task_id = t.task_id and l.task_lease_id = t.lease_id));

-- check: effect_twice duplicate
-- A db_function effect recorded more than once (its key).
select key from chaos.effect group by key having count(*) > 1;

-- check: effect_missing lost
-- A completed chaos.apply_effect task whose effect is not recorded.
select t.task_id
from queues.task t
where t.task_type = 'db_function' and t.payload ->> 'db_function' = 'chaos.apply_effect' and t.status = 'completed'
  and not exists (select from chaos.effect e where e.key = t.payload ->> 'key');

-- check: effect_without_completion duplicate
-- An effect whose task is not completed: the function's writes outlived a rolled-back attempt, so a re-run would apply it again.
select e.key
from chaos.effect e
join queues.task t on t.task_type = 'db_function' and t.idempotency_key = 'chaos-' || e.key
where t.status <> 'completed';

-- check: child_twice duplicate
-- A db_function task whose child task was enqueued more than once (the parent's key).
select payload ->> 'parent' from queues.task
where task_type = 'taskorch.noop' and payload ? 'parent'
group by 1 having count(*) > 1;

-- check: child_missing lost
-- A completed db_function task that should have enqueued a child and has none.
select t.task_id
from queues.task t
where t.task_type = 'db_function' and t.payload ->> 'db_function' = 'chaos.apply_effect' and t.status = 'completed'
  and coalesce((t.payload ->> 'child')::boolean, false)
  and not exists (select from queues.task c where c.task_type = 'taskorch.noop' and c.payload ->> 'parent' = t.payload ->> 'key');

-- check: email_not_terminal lost
-- An email process with no terminal fact (neither send_email_task_succeeded nor _failed).
select r.send_email_task_id
from chaos.email_request r
where not exists (select from comms.send_email_task_succeeded s where s.send_email_task_id = r.send_email_task_id)
  and not exists (select from comms.send_email_task_failed f where f.send_email_task_id = r.send_email_task_id);

-- check: email_two_terminal_facts duplicate
-- An email process run that both succeeded and failed (a run restarted by hand after a failure
-- may succeed: docs/processes.md, "Retrying a failed process").
select s.send_email_task_id
from comms.send_email_task_succeeded s
join comms.send_email_task_failed f using (send_email_task_id)
where f.run = comms.send_email_run(f.send_email_task_id);

-- check: email_sent_twice duplicate
-- An email process with more than one succeeded attempt.
select a.send_email_task_id
from comms.send_email_attempt a
join comms.send_email_attempt_succeeded s using (send_email_attempt_id)
group by a.send_email_task_id having count(*) > 1;

-- check: email_success_unrecorded lost
-- An email process recorded as sent without a succeeded attempt.
select s.send_email_task_id
from comms.send_email_task_succeeded s
where not exists (select from comms.send_email_attempt a
                  join comms.send_email_attempt_succeeded x using (send_email_attempt_id)
                  where a.send_email_task_id = s.send_email_task_id);

-- check: email_failed_after_success duplicate
-- An email process run that gave up although one of its attempts succeeded.
select f.send_email_task_id
from comms.send_email_task_failed f
where exists (select from comms.send_email_attempt a
              join comms.send_email_attempt_succeeded x using (send_email_attempt_id)
              where a.send_email_task_id = f.send_email_task_id
                and a.send_email_attempt_id > coalesce((select max(z.last_attempt_id) from comms.send_email_task_restarted z
                                                        where z.send_email_task_id = f.send_email_task_id and z.run <= f.run), 0)
                and a.send_email_attempt_id <= coalesce((select min(z.last_attempt_id) from comms.send_email_task_restarted z
                                                         where z.send_email_task_id = f.send_email_task_id and z.run > f.run), 9223372036854775807));

-- check: email_attempt_two_facts duplicate
-- An email attempt recorded both as succeeded and as failed.
select s.send_email_attempt_id
from comms.send_email_attempt_succeeded s
join comms.send_email_attempt_failed f using (send_email_attempt_id);

-- check: unexplained_failure unexplained
-- A failed or dead task without any row in queues.error.
select t.task_id
from queues.task t
where t.status in ('failed', 'dead')
  and not exists (select from queues.error e where e.task_id = t.task_id);

-- check: unexplained_process_failure unexplained
-- An email process that gave up without saying why.
select send_email_task_id from comms.send_email_task_failed where btrim(error_message) = '';

-- check: email_unexpected_outcome info
-- An email process whose outcome is not the one its recipient was set up for (e.g. a normal recipient given up on after repeated crashes).
select r.send_email_task_id
from chaos.email_request r
where (r.expect = 'sent' and not exists (select from comms.send_email_task_succeeded s where s.send_email_task_id = r.send_email_task_id))
   or (r.expect = 'gave_up' and not exists (select from comms.send_email_task_failed f where f.send_email_task_id = r.send_email_task_id));

-- check: provider_called_twice info
-- An email process whose provider (the outbox) delivered more than once: allowed, the provider call is outside any transaction (docs/guarantees.md).
select a.send_email_task_id
from comms.send_email_attempt a
join queues.outbox_message m on m.task_id = a.task_id and m.status = 'sent'
group by a.send_email_task_id having count(*) > 1;

-- check: refused_completions info
-- Completions the database refused because the lease was stale (recorded in queues.error).
select task_id from queues.error where error_message like 'completion refused%';

-- check: refused_failures info
-- Failures the database refused because the lease was stale (recorded in queues.error).
select task_id from queues.error where error_message like 'failure refused%';

-- check: lease_expirations info
-- Leases that expired and were rescued by a claim (their worker was killed, paused or cut off).
select task_id from queues.task_event where event = 'lease_expired';

-- check: reaped_recoveries info
-- Tasks recovered by the leader from a worker it reaped for not heartbeating.
select task_id from queues.task_event where event = 'recovered' and detail like '%stopped heartbeating%';

-- check: session_recoveries info
-- Tasks recovered by the leader from a worker whose database session was gone for the grace (killed, or cut off).
select task_id from queues.task_event where event = 'recovered' and detail like '%lost its database session%';

-- check: restart_recoveries info
-- Tasks recovered by a worker that took over the id of a killed one (started again under the same id).
select task_id from queues.task_event where event = 'recovered' and detail like '%registered again as a new process%';

-- check: claims_redis_transport info
-- Claims by the workers of the Redis transport phase (worker ids redis*): the transport carried work.
select task_id from queues.task_lease where worker_id like 'redis%';

-- check: claims_netns info
-- Claims by the workers in network namespaces (worker ids ns*): they did work over their veth.
select task_id from queues.task_lease where worker_id like 'ns%';
