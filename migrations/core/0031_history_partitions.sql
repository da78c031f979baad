-- History that is partitioned, not deleted (docs/design.md, "Partitioned history"; docs/operations.md,
-- "Retention"). queues.task_lease is partitioned by range of leased_at and queues.task_event by
-- range of occurred_at: one partition per UTC day, queues.task_lease_pYYYYMMDD and
-- queues.task_event_pYYYYMMDD, and a DEFAULT partition each (queues.task_lease_default,
-- queues.task_event_default) that catches a row no day partition covers (a clock jump, a leader
-- down for days), so a missing partition never makes a claim or an outcome fail. The leader keeps
-- partitions ahead, moves what the default caught into its day and drops whole days past their
-- retention (queues.maintain_history); queues.prune_finished no longer deletes lease and event
-- rows. queues.error stays one plain table: failures are rare rows, deleted with their task.
--
-- The upgrade moves the existing history in this one transaction: the old tables are renamed
-- aside, the partitioned ones created under the old names (with the same columns, defaults,
-- indexes, comments, append-only triggers and no grants, as core/0001 and core/0002 made them),
-- a day partition is created for every day the old rows cover (and today and the two days
-- after), the rows are copied with their ids, the identity sequences continue after both the
-- largest id and the old sequence's last value (a lease id is a fencing token: none is ever
-- issued twice), and the old tables are dropped. Their sequence names stay, since
-- internal.lease_tasks draws lease ids from queues.task_lease_task_lease_id_seq by name. No view
-- and no `begin atomic` function depends on these tables (every function reading them is
-- plpgsql, resolved at run time); a view an operator built on them makes the DROP fail and the
-- whole migration roll back, naming it: drop it first and create it again afterwards.
--
-- A partitioned table's primary key must hold its partition key: (task_lease_id, leased_at) and
-- (task_event_id, occurred_at). The ids still come from one sequence each, so they stay unique.

-- What would block dropping the old tables (a view, a rule, a foreign key, an atomic function
-- of the operator's) is named up front, before anything changes.
do $$
declare
    _deps text;
begin
    select string_agg(distinct pg_describe_object(d.classid, d.objid, d.objsubid), ', ')
    into _deps
    from pg_depend d
    where d.refclassid = 'pg_class'::regclass
      and d.refobjid in ('queues.task_lease'::regclass, 'queues.task_event'::regclass)
      and d.deptype = 'n';
    if _deps is not null then
        raise exception 'core/0031 partitions queues.task_lease and queues.task_event, but % depend(s) on them: drop them, migrate, and create them again', _deps
            using errcode = 'dependent_objects_still_exist';
    end if;
end $$;

-- The old tables, their indexes and sequences step aside.
alter table queues.task_lease rename to task_lease_old;
alter index queues.task_lease_pkey rename to task_lease_old_pkey;
alter index queues.task_lease_task_id_idx rename to task_lease_old_task_id_idx;
alter sequence queues.task_lease_task_lease_id_seq rename to task_lease_old_task_lease_id_seq;
alter table queues.task_event rename to task_event_old;
alter index queues.task_event_pkey rename to task_event_old_pkey;
alter index queues.task_event_task_id_idx rename to task_event_old_task_id_idx;
alter sequence queues.task_event_task_event_id_seq rename to task_event_old_task_event_id_seq;

create table queues.task_lease (
    task_lease_id bigint generated always as identity (sequence name queues.task_lease_task_lease_id_seq),  -- the fencing token
    task_id       bigint      not null,
    worker_id     text,
    attempt       integer     not null,
    leased_at     timestamptz not null default now(),
    expires_at    timestamptz not null,                              -- as granted; renewals move queues.task.lease_expires_at
    constraint task_lease_pkey primary key (task_lease_id, leased_at)
) partition by range (leased_at);
create index task_lease_task_id_idx on queues.task_lease (task_id);
comment on table queues.task_lease is 'Append-only: one row per claim. Its id is the fencing token.';
create table queues.task_lease_default partition of queues.task_lease default;

create table queues.task_event (
    task_event_id bigint generated always as identity (sequence name queues.task_event_task_event_id_seq),
    task_id       bigint      not null,
    occurred_at   timestamptz not null default now(),
    event         text        not null,  -- claimed, completed, retry_scheduled, failed, dead, cancelled,
                                         -- retried, lease_expired, snoozed, refused
    from_status   queues.task_status,
    to_status     queues.task_status,
    lease_id      bigint,
    worker_id     text,
    attempt       integer,
    detail        text,
    constraint task_event_pkey primary key (task_event_id, occurred_at)
) partition by range (occurred_at);
create index task_event_task_id_idx on queues.task_event (task_id);
comment on table queues.task_event is 'Append-only: one row per state change of a task, with the worker that caused it.';
create table queues.task_event_default partition of queues.task_event default;

-- Updates are refused as before: a statement trigger on each parent, and one on each partition,
-- since a statement trigger of a partitioned table fires only for statements naming it.
create trigger task_lease_append_only before update on queues.task_lease
    for each statement execute function internal.refuse_update();
create trigger task_lease_append_only before update on queues.task_lease_default
    for each statement execute function internal.refuse_update();
create trigger task_event_append_only before update on queues.task_event
    for each statement execute function internal.refuse_update();
create trigger task_event_append_only before update on queues.task_event_default
    for each statement execute function internal.refuse_update();

-- Creates the day partition of queues.<_table> (task_lease or task_event) for UTC day _day,
-- unless a table of that name exists, moving into it the rows of that day the default partition
-- caught. The partition is built beside the table and attached, which locks the parent in SHARE
-- UPDATE EXCLUSIVE mode only (claims go on inserting); the default partition is locked first,
-- so no row of that day can land in it between the move and the attach. Identifiers come from
-- format('%I'), bounds from the date: nothing here is built from text a caller gave.
create function internal.history_partition(_table text, _day date, out created boolean, out moved bigint)
language plpgsql volatile set search_path = pg_catalog, pg_temp set timezone = 'UTC' set datestyle = 'ISO, YMD' as $$
declare
    _col  text;
    _name text;
    _lo   timestamptz;
    _hi   timestamptz;
begin
    _col := case _table when 'task_lease' then 'leased_at' when 'task_event' then 'occurred_at' end;
    if _col is null then
        raise exception 'history_partition: table must be task_lease or task_event, got %', coalesce(quote_literal(_table), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if _day is null or _day not between date '0001-01-01' and date '9999-12-30' then
        raise exception 'history_partition: day must be between 0001-01-01 and 9999-12-30, got %', coalesce(_day::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    created := false;
    moved := 0;
    _name := _table || '_p' || to_char(_day, 'YYYYMMDD');
    if to_regclass(format('queues.%I', _name)) is not null then
        return;
    end if;
    _lo := _day::timestamptz;
    _hi := (_day + 1)::timestamptz;
    execute format('lock table queues.%I in access exclusive mode', _table || '_default');
    execute format('create table queues.%I (like queues.%I including defaults)', _name, _table);
    execute format('with m as (delete from queues.%I where %I >= $1 and %I < $2 returning *) insert into queues.%I select * from m',
        _table || '_default', _col, _col, _name) using _lo, _hi;
    get diagnostics moved = row_count;
    execute format('alter table queues.%I attach partition queues.%I for values from (%L) to (%L)', _table, _name, _lo, _hi);
    execute format('create trigger %I before update on queues.%I for each statement execute function internal.refuse_update()',
        _table || '_append_only', _name);
    created := true;
end $$;

-- The days the old rows cover, and today and the two days after, get their partitions.
select internal.history_partition('task_lease', d)
from (select distinct (leased_at at time zone 'UTC')::date as d from queues.task_lease_old
      union
      select (now() at time zone 'UTC')::date + g from generate_series(0, 2) g) days
order by d;
select internal.history_partition('task_event', d)
from (select distinct (occurred_at at time zone 'UTC')::date as d from queues.task_event_old
      union
      select (now() at time zone 'UTC')::date + g from generate_series(0, 2) g) days
order by d;

insert into queues.task_lease (task_lease_id, task_id, worker_id, attempt, leased_at, expires_at)
overriding system value
select task_lease_id, task_id, worker_id, attempt, leased_at, expires_at from queues.task_lease_old;
insert into queues.task_event (task_event_id, task_id, occurred_at, event, from_status, to_status, lease_id, worker_id, attempt, detail)
overriding system value
select task_event_id, task_id, occurred_at, event, from_status, to_status, lease_id, worker_id, attempt, detail from queues.task_event_old;

-- Each sequence continues after the larger of the largest id and the old sequence's last value
-- (ids issued and then pruned, or drawn by a claim that rolled back, are never issued again).
-- A sequence never used stays fresh.
select setval('queues.task_lease_task_lease_id_seq', greatest(m, s), true)
from (select (select max(task_lease_id) from queues.task_lease_old) as m,
             pg_sequence_last_value('queues.task_lease_old_task_lease_id_seq') as s) x
where m is not null or s is not null;
select setval('queues.task_event_task_event_id_seq', greatest(m, s), true)
from (select (select max(task_event_id) from queues.task_event_old) as m,
             pg_sequence_last_value('queues.task_event_old_task_event_id_seq') as s) x
where m is not null or s is not null;

drop table queues.task_lease_old;
drop table queues.task_event_old;

-- Leader maintenance of the history partitions. As the leader of _term, it
--   (a) creates the day partitions of today (UTC) to today + _ahead_days that are missing;
--   (b) moves the rows the default partitions caught into their days' partitions, created as
--       needed;
--   (c) drops the day partitions (only ours: named <table>_pYYYYMMDD with exactly that day's
--       bounds; never a default partition) whose upper bound is older than now() - _keep. A
--       NULL or negative _keep keeps history forever: nothing is dropped.
-- All in one transaction. Returns {"created": [partitions], "moved": rows, "dropped":
-- [partitions]}; NULL when _term is not the current leader term (nothing is done). A lock it
-- waits for longer than lock_timeout (5 seconds) fails the call and undoes it; the leader tries
-- again at its next pass. Dropping a partition locks its parent for a moment (ACCESS EXCLUSIVE),
-- once per table and day.
create function queues.maintain_history(_term bigint, _keep interval, _ahead_days integer default 2)
returns jsonb
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp set timezone = 'UTC' set datestyle = 'ISO, YMD' set lock_timeout = '5s' as $$
declare
    _table   text;
    _col     text;
    _day     date;
    _today   date := (now() at time zone 'UTC')::date;
    _r       record;
    _p       record;
    _created text[] := '{}';
    _dropped text[] := '{}';
    _moved   bigint := 0;
begin
    if _ahead_days is null or _ahead_days not between 0 and 366 then
        raise exception 'maintain_history: ahead_days must be between 0 and 366, got %', coalesce(_ahead_days::text, 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if not internal.holds_leader_term(_term) then
        return null;
    end if;

    foreach _table in array array['task_lease', 'task_event'] loop
        _col := case _table when 'task_lease' then 'leased_at' else 'occurred_at' end;
        -- (b) The default partition is empty unless something went wrong: reading it is cheap.
        -- A row dated beyond the years a partition name can hold stays where it is.
        for _day in execute format('select distinct (%I at time zone ''UTC'')::date from queues.%I
                                    where %I >= timestamptz ''0001-01-01 00:00+00'' and %I < timestamptz ''9999-12-31 00:00+00''
                                    order by 1', _col, _table || '_default', _col, _col) loop
            _r := internal.history_partition(_table, _day);
            _moved := _moved + _r.moved;
            if _r.created then
                _created := _created || (_table || '_p' || to_char(_day, 'YYYYMMDD'));
            end if;
        end loop;
        -- (a)
        for _day in select _today + g from generate_series(0, _ahead_days) g loop
            _r := internal.history_partition(_table, _day);
            if _r.created then
                _created := _created || (_table || '_p' || to_char(_day, 'YYYYMMDD'));
            end if;
        end loop;
        -- (c)
        if _keep is null or _keep < interval '0' then
            continue;
        end if;
        for _p in
            select c.relname::text as name, pg_get_expr(c.relpartbound, c.oid) as bound
            from pg_inherits i
            join pg_class c on c.oid = i.inhrelid
            where i.inhparent = format('queues.%I', _table)::regclass
              and c.relname ~ ('^' || _table || '_p[0-9]{8}$')
            order by c.relname
        loop
            begin
                _day := to_date(right(_p.name, 8), 'YYYYMMDD');
            exception when others then
                continue;  -- eight digits that are no date: not ours
            end;
            if to_char(_day, 'YYYYMMDD') <> right(_p.name, 8)
               or _p.bound is distinct from format('FOR VALUES FROM (%L) TO (%L)', _day::timestamptz, (_day + 1)::timestamptz)
               or (_day + 1)::timestamptz >= now() - _keep then
                continue;
            end if;
            execute format('drop table queues.%I', _p.name);
            _dropped := _dropped || _p.name;
        end loop;
    end loop;
    return jsonb_build_object('created', to_jsonb(_created), 'moved', _moved, 'dropped', to_jsonb(_dropped));
end $$;
comment on function queues.maintain_history(bigint, interval, integer) is
    'Leader maintenance of the partitioned history: creates day partitions ahead, moves rows the default partitions caught, drops days older than _keep.';

-- Retention (core/0004) without the lease and event rows: those go with their day partitions
-- (queues.maintain_history). Deletes up to _limit tasks in one of _statuses (finished statuses
-- only) that finished more than _older_than ago, with their error rows. Call it again while it
-- returns _limit: each call is one short transaction. Returns the number of tasks deleted; NULL
-- when _term is not the current leader term (nothing is deleted).
create or replace function queues.prune_finished(
    _older_than interval,
    _limit integer,
    _term bigint,
    _statuses queues.task_status[] default '{completed,cancelled}')
returns integer
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
-- Plans for the values of this call: a generic plan guesses the batch size and could pick
-- sequential scans of the task table.
set plan_cache_mode = force_custom_plan as $$
declare
    _ids bigint[];
    _status queues.task_status;
begin
    if _older_than is null or _older_than < interval '0' then
        raise exception 'prune_finished: older_than must not be negative, got %', _older_than
            using errcode = 'invalid_parameter_value';
    end if;
    if _limit is null or _limit not between 1 and 100000 then
        raise exception 'prune_finished: limit must be between 1 and 100000, got %', _limit
            using errcode = 'invalid_parameter_value';
    end if;
    if coalesce(cardinality(_statuses), 0) = 0
       or exists (select from unnest(_statuses) s where s is null or s not in ('completed', 'cancelled', 'failed', 'dead')) then
        raise exception 'prune_finished: statuses must be finished ones (completed, cancelled, failed, dead), got %', _statuses
            using errcode = 'invalid_parameter_value';
    end if;
    if not internal.holds_leader_term(_term) then
        return null;
    end if;

    -- One status at a time, oldest first: the order makes the planner walk task_finished_idx
    -- from its oldest entry for that status and stop after _limit rows (core/0004).
    foreach _status in array _statuses loop
        with doomed as (
            select t.task_id
            from queues.task t
            where t.status in ('completed', 'cancelled', 'failed', 'dead')  -- task_finished_idx's predicate
              and t.status = _status
              and greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at) < now() - _older_than
            order by greatest(t.completed_at, t.cancelled_at, t.failed_at, t.dead_at)
            limit _limit - coalesce(cardinality(_ids), 0)
            for update skip locked
        ), gone as (
            delete from queues.task t
            using doomed d
            where t.task_id = d.task_id
            returning t.task_id
        )
        select coalesce(_ids, '{}') || array_agg(g.task_id) into _ids from gone g;
        exit when cardinality(_ids) >= _limit;
    end loop;
    if coalesce(cardinality(_ids), 0) = 0 then
        return 0;
    end if;
    -- Errors go with their task, found through error_task_id_idx. Leases and events stay in
    -- their day partitions until queues.maintain_history drops the day.
    delete from queues.error where task_id = any (_ids);
    return cardinality(_ids);
end $$;

-- Privileges, as core/0002 and core/0004: no table is granted to anyone; the worker role (which
-- the leader runs as) gets maintain_history, as it has prune_finished.
revoke all on table queues.task_lease, queues.task_event, queues.task_lease_default, queues.task_event_default from public;
revoke all on sequence queues.task_lease_task_lease_id_seq, queues.task_event_task_event_id_seq from public;
revoke all on function internal.history_partition(text, date) from public;
revoke all on function queues.maintain_history(bigint, interval, integer) from public;
grant execute on function queues.maintain_history(bigint, interval, integer) to worker_service_user;
