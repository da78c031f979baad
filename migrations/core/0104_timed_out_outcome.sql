-- A third terminal outcome of a process instance, timed_out (docs/processes.md, "Outcomes"): a
-- wait step whose signal did not come in time ("not paid in time") is not a failure.
-- queues.process_instance_counts answers a timed_out count too: its return table changes, so
-- it is dropped and defined again; the roles granted it are granted the new one. The instances
-- views of processes created before this version answer no timed_out instance, so their count
-- is 0 (they keep working unchanged).
create temporary table process_counts_grantees on commit drop as
select distinct a.grantee::regrole::text as role
from pg_catalog.pg_proc p
cross join lateral aclexplode(p.proacl) a
where p.oid = 'queues.process_instance_counts(integer, text[])'::regprocedure
  and a.privilege_type = 'EXECUTE'
  and a.grantee <> 0
  and a.grantee <> p.proowner;

drop function queues.process_instance_counts(integer, text[]);

\ir functions/queues/process_instance_counts.sql

do $$
declare
    _role text;
begin
    for _role in select role from pg_temp.process_counts_grantees loop
        execute format('grant execute on function queues.process_instance_counts(integer, text[]) to %s', _role);
    end loop;
end $$;
