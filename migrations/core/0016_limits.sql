-- Flow control as data: limits on how many tasks of a type run at once and how fast they are
-- claimed, for the type as a whole or per value of a payload field. docs/limits.md describes
-- them; this file is their definition.
--
-- 1. queues.task_limit: one row per limit, named by the task type it limits, or by
--    'db_function:<schema.function>' for the db_function tasks of one function (which then do
--    not count under a limit of db_function itself). queues.limit_bucket: the token buckets of
--    rate limits, one per (limit, key), so a rate holds across workers and restarts.
-- 2. queues.task.limit_name and limit_key: the limit a task counts under and its bucket in it
--    ('' for a limit without a key field, '=' || value for a scalar key value, '*' for the
--    null-key bucket: the field missing, null, an object or an array). Both NULL for a task no
--    limit governs, so the indexes that serve limited claims hold nothing else. Set by a
--    statement trigger on insert and by set_limit/remove_limit for the tasks already there.
-- 3. claim_tasks and claim_tasks_by_id hand out a limited task only while its bucket has a free
--    running slot and a token, rotating across keys; unlimited tasks are claimed as before.
-- 4. queues.set_limit, queues.remove_limit, the view queues.limit_status, and
--    queues.limit_wait, the hint a worker asks for when a claim came back short.
-- 5. Under the Redis and SQS transports, limited tasks are not sent as messages (dispatch_tasks
--    leaves them out): a worker claims them from PostgreSQL with queues.claim_limited_tasks,
--    since only the database knows when a slot or a token frees.

-- Tables ----------------------------------------------------------------------------------------

create table queues.task_limit (
    task_type text primary key,
    max_running integer,
    rate_per_second double precision,
    burst integer not null default 1,
    key_field text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    key_cursor text,  -- where the next claim starts looking at keys (internal.limited_candidates)
    constraint task_limit_type_valid check (task_type ~ '^[A-Za-z][A-Za-z0-9_.:-]*$' and length(task_type) <= 128),
    constraint task_limit_limits_something check (max_running is not null or rate_per_second is not null),
    constraint task_limit_max_running_positive check (max_running >= 1),
    constraint task_limit_rate_valid check (rate_per_second > 0 and rate_per_second <= 1000000),
    constraint task_limit_burst_valid check (burst between 1 and 1000000),
    constraint task_limit_key_field_valid check (key_field ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$')
);
comment on table queues.task_limit is
    'Flow control, one row per limit, named by its task type or db_function:<schema.function>: at most max_running of its tasks running at once and at most rate_per_second claims (burst: the bucket size), per distinct value of payload->key_field when set. Managed with queues.set_limit and queues.remove_limit.';

create table queues.limit_bucket (
    task_type text not null references queues.task_limit on delete cascade,
    limit_key text not null,
    tokens double precision not null,
    refilled_at timestamptz not null,
    primary key (task_type, limit_key)
);
comment on table queues.limit_bucket is
    'Token buckets of rate limits: tokens left at refilled_at; a bucket refills at the limit''s rate up to its burst. A missing bucket is a full one.';

alter table queues.task add column limit_name text, add column limit_key text;
comment on column queues.task.limit_name is
    'The limit (queues.task_limit.task_type) the task counts under while it is pending or running; NULL when no limit governs it.';
comment on column queues.task.limit_key is
    'The task''s bucket in its limit: '''' (no key field), ''=''||value (a scalar key value), ''*'' (the key field missing or not a scalar). NULL when no limit governs it.';

-- Only tasks a limit governs are in these; other tasks pay nothing for them.
create index task_limited_pending_idx on queues.task (limit_name, limit_key, priority desc, run_at, task_id)
    where status = 'pending' and limit_name is not null;
create index task_limited_running_idx on queues.task (limit_name, limit_key)
    where status = 'running' and limit_name is not null;

-- Keys ------------------------------------------------------------------------------------------

-- The bucket of a payload under a limit whose key field is _key_field (NULL: no key field).
create function internal.limit_key(_key_field text, _payload jsonb) returns text
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select case
        when _key_field is null then ''
        when jsonb_typeof(_payload -> _key_field) in ('string', 'number', 'boolean') then '=' || (_payload ->> _key_field)
        else '*'
    end
$$;

-- The part of a token a claim may borrow: a bucket hands out a token once it holds 1 - slack,
-- and its tokens then go below zero by at most the slack, paid back before the next token. It
-- is 2 ms of the rate (at most half a token), so that a claim arriving up to 2 ms before its
-- token is due does not miss it and arrive late, which would cost the rate that time: a bucket
-- full to its burst accrues nothing more. Over any span, the claims stay within burst + rate
-- × span + the slack, and the slack is less than one.
create function internal.limit_slack(_rate double precision) returns double precision
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select least(0.5, _rate * 0.002)
$$;

-- The task type a limit's tasks have: db_function for 'db_function:<schema.function>', else the
-- limit's name.
create function internal.limit_task_type(_limit_name text) returns text
language sql immutable parallel safe set search_path = pg_catalog, pg_temp as $$
    select case when _limit_name like 'db_function:%' then 'db_function' else _limit_name end
$$;

-- The limit that governs a task of _task_type with _payload, or NULL: for a db_function task,
-- the limit of its function if there is one, else the limit of its type.
create function internal.limit_of(_task_type text, _payload jsonb) returns queues.task_limit
language sql stable set search_path = pg_catalog, pg_temp as $$
    select l.* from queues.task_limit l
    where l.task_type = _task_type
       or (_task_type = 'db_function' and l.task_type = 'db_function:' || (_payload ->> 'db_function'))
    order by l.task_type = _task_type  -- false first: the function's own limit
    limit 1
$$;

-- Gives the tasks a statement inserted their limit and bucket, when a limit governs them. One
-- EXISTS on an empty table per statement when no limit is set.
create function internal.set_inserted_limit_keys() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if not exists (select from queues.task_limit) then
        return null;
    end if;
    update queues.task t
    set limit_name = l.task_type, limit_key = internal.limit_key(l.key_field, t.payload)
    from inserted_tasks n
    cross join lateral (select * from internal.limit_of(n.task_type, n.payload)) l
    where t.task_id = n.task_id and l.task_type is not null;
    return null;
end $$;

create trigger task_inserted_limit_keys after insert on queues.task
    referencing new table as inserted_tasks
    for each statement execute function internal.set_inserted_limit_keys();

-- Managing limits -------------------------------------------------------------------------------

-- Gives every pending and running task that the limit _limit_name could govern its limit and
-- bucket as the limits now are (none: NULL). Holds queues.task in SHARE ROW EXCLUSIVE mode until the caller commits, so
-- that no insert made under the old limit commits after this: writers wait for the change (at
-- most 5 seconds are spent waiting for writers already in flight).
create function internal.rekey_limited_tasks(_limit_name text)
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
      and o.status in ('pending', 'running')
      and (o.limit_name, o.limit_key) is distinct from
          (l.task_type, case when l.task_type is not null then internal.limit_key(l.key_field, o.payload) end);
end $$;

-- Creates or replaces the limit of a task type (a type with no tasks yet is fine), or, named
-- 'db_function:<schema.function>', of the db_function tasks of that function, which then do not
-- count under a limit of db_function itself:
--   _max_running      at most that many tasks of the type running at once, across every worker;
--   _rate_per_second  at most that many claims per second, with bursts of up to _burst (a token
--                     bucket kept in queues.limit_bucket, so it holds across workers and restarts);
--   _key_field        a top-level payload field: both apply per distinct value of it instead
--                     of to the type as a whole. A task whose field is missing, null, an object
--                     or an array counts in one more bucket, the null-key bucket.
-- At least one of _max_running and _rate_per_second is required. Replacing a limit keeps its
-- buckets' tokens unless the key field changes.
create function queues.set_limit(
    _task_type text,
    _max_running integer default null,
    _rate_per_second double precision default null,
    _burst integer default null,
    _key_field text default null)
returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _old queues.task_limit;
begin
    if _task_type is null or _task_type !~ '^[A-Za-z][A-Za-z0-9_.:-]*$' or length(_task_type) > 128 then
        raise exception 'set_limit: task type % is not valid (a letter, then letters, digits, _ . : -; at most 128)',
            coalesce(to_jsonb(left(_task_type, 130))::text, 'NULL') using errcode = 'invalid_parameter_value';
    end if;
    if _task_type like 'db_function:%' and _task_type !~ '^db_function:[a-z_][a-z0-9_$]*[.][a-z_][a-z0-9_$]*$' then
        raise exception 'set_limit: % does not name a function: db_function:schema.name, two lowercase SQL identifiers',
            to_jsonb(left(_task_type, 130))::text using errcode = 'invalid_parameter_value';
    end if;
    if _max_running is null and _rate_per_second is null then
        raise exception 'set_limit: give _max_running, _rate_per_second or both (to lift the limit of %, call queues.remove_limit)', _task_type
            using errcode = 'invalid_parameter_value';
    end if;
    if _max_running < 1 then
        raise exception 'set_limit: _max_running must be at least 1, got %', _max_running using errcode = 'invalid_parameter_value';
    end if;
    if _rate_per_second <= 0 or _rate_per_second > 1000000 or _rate_per_second = 'NaN' then
        raise exception 'set_limit: _rate_per_second must be above 0 and at most 1000000, got %', _rate_per_second
            using errcode = 'invalid_parameter_value';
    end if;
    if _burst is not null and _rate_per_second is null then
        raise exception 'set_limit: _burst needs _rate_per_second' using errcode = 'invalid_parameter_value';
    end if;
    if _burst < 1 or _burst > 1000000 then
        raise exception 'set_limit: _burst must be between 1 and 1000000, got %', _burst using errcode = 'invalid_parameter_value';
    end if;
    if _key_field is not null and _key_field !~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$' then
        raise exception 'set_limit: key field % is not a plain identifier (a letter or _, then letters, digits or _; at most 63)',
            to_jsonb(left(_key_field, 70))::text using errcode = 'invalid_parameter_value';
    end if;

    select * into _old from queues.task_limit where task_type = _task_type for update;
    insert into queues.task_limit as l (task_type, max_running, rate_per_second, burst, key_field)
    values (_task_type, _max_running, _rate_per_second, coalesce(_burst, 1), _key_field)
    on conflict (task_type) do update
    set max_running = excluded.max_running, rate_per_second = excluded.rate_per_second,
        burst = excluded.burst, key_field = excluded.key_field, updated_at = now();

    if _old.task_type is null or _old.key_field is distinct from _key_field then
        delete from queues.limit_bucket b where b.task_type = _task_type;
        perform internal.rekey_limited_tasks(_task_type);
    end if;
end $$;

-- Removes the limit of a task type: its tasks are claimed freely again. False when the type had
-- no limit.
create function queues.remove_limit(_task_type text) returns boolean
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    delete from queues.task_limit where task_type = _task_type;
    if not found then
        return false;
    end if;
    perform internal.rekey_limited_tasks(_task_type);
    return true;
end $$;

-- Claiming under limits -------------------------------------------------------------------------

-- Chooses and locks up to _want pending, due tasks of the limited types _types (NULL: every
-- limited type) that their limits let run now; with _only_ids, only among those tasks. For each
-- limit it can lock (a limit another claim holds is skipped this round: that claim serves it),
-- each bucket (key) gets at most its free running slots and its whole tokens. A claim looks at
-- no more than max(4 × _want, 64) keys, starting after the furthest key the previous claim took
-- from, and wrapping around. The
-- candidates rotate across buckets, fewest running first: a task's rank is its bucket's running tasks plus
-- its place in the bucket, and lower ranks come first, so an idle key's first task goes before
-- a busy key's next one, and one key's backlog cannot starve the others; among equal ranks, keys
-- come in order from the cursor, so that successive claims rotate through the keys even when
-- every task finishes between two claims (priority and age order the tasks within a key).
-- Tokens are
-- not taken here: see internal.take_limit_tokens, called with what the claim finally leases.
create function internal.limited_candidates(_types text[], _want integer, _only_ids bigint[], _clock timestamptz)
returns setof bigint
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _l queues.task_limit;
    _ids bigint[] := '{}';
    _ranks bigint[] := '{}';
    _got bigint[];
    _got_ranks bigint[];
    _window integer;
    _cursor text;
    _last text;
begin
    for _l in
        select * from queues.task_limit l
        where _types is null or l.task_type = any (_types)
        order by l.task_type
        for update skip locked
    loop
        -- The keys to look at: at most _window of them, in key order from the limit's cursor,
        -- wrapping around (a claim by id looks at the keys of its tasks). Bounding the window
        -- bounds a claim's cost however many keys have tasks; moving the cursor past the keys
        -- looked at makes successive claims rotate through all of them.
        _window := case when _only_ids is not null then cardinality(_only_ids) else greatest(4 * _want, 64) end;
        _cursor := case when _only_ids is null then _l.key_cursor end;
        with recursive after_cursor(k, n) as (
            select (select t.limit_key from queues.task t
                    where t.limit_name = _l.task_type and t.status = 'pending'
                      and (_cursor is null or t.limit_key > _cursor)
                      and (_only_ids is null or t.task_id = any (_only_ids))
                    order by t.limit_key limit 1), 1
            union all
            select (select t.limit_key from queues.task t
                    where t.limit_name = _l.task_type and t.status = 'pending' and t.limit_key > a.k
                      and (_only_ids is null or t.task_id = any (_only_ids))
                    order by t.limit_key limit 1), a.n + 1
            from after_cursor a where a.k is not null and a.n < _window
        ), before_cursor(k, n) as (
            select (select t.limit_key from queues.task t
                    where t.limit_name = _l.task_type and t.status = 'pending' and t.limit_key <= _cursor
                    order by t.limit_key limit 1), 1
            where _cursor is not null
            union all
            select (select t.limit_key from queues.task t
                    where t.limit_name = _l.task_type and t.status = 'pending' and t.limit_key > b.k and t.limit_key <= _cursor
                    order by t.limit_key limit 1), b.n + 1
            from before_cursor b where b.k is not null and b.n < _window
        ), keys(k, ord) as (
            select a.k, a.n from after_cursor a where a.k is not null
            union all
            select b.k, _window + b.n from before_cursor b
            where b.k is not null and b.n <= _window - (select count(*) from after_cursor a where a.k is not null)
        ), running as (
            select t.limit_key as k, count(*) as n
            from queues.task t
            where t.limit_name = _l.task_type and t.status = 'running'
            group by t.limit_key
        ), room as (
            select keys.k, keys.ord, coalesce(r.n, 0) as busy,
                   least(_want::bigint,
                         coalesce(_l.max_running - coalesce(r.n, 0), _want),
                         case when _l.rate_per_second is null then _want
                              else floor(least(_l.burst::double precision,
                                               coalesce(b.tokens, _l.burst) + _l.rate_per_second
                                                   * greatest(0, extract(epoch from _clock - coalesce(b.refilled_at, _clock))))
                                         + internal.limit_slack(_l.rate_per_second))::bigint end) as n
            from keys
            left join running r on r.k = keys.k
            left join queues.limit_bucket b on b.task_type = _l.task_type and b.limit_key = keys.k
            where keys.k is not null
        )
        , candidates as (
            select c.task_id, c.rank, c.rn, room.ord, room.k
            from room
            cross join lateral (
                select t.task_id, t.rn, room.busy + t.rn as rank
                from (select t.task_id, t.priority, t.run_at,
                             row_number() over (order by t.priority desc, t.run_at, t.task_id) as rn
                      from queues.task t
                      where t.limit_name = _l.task_type and t.limit_key = room.k and t.status = 'pending'
                        and t.run_at <= now()
                        and (_only_ids is null or t.task_id = any (_only_ids))
                      order by t.priority desc, t.run_at, t.task_id
                      limit room.n) t
            ) c
            where room.n > 0
        ), picked as (
            -- Fewest running first; among equals, keys in order from the cursor, so that
            -- successive claims rotate through the keys; within a key, priority then age.
            select * from candidates order by rank, ord, rn limit _want
        )
        select array_agg(p.task_id order by p.rank, p.ord, p.rn),
               array_agg(p.rank order by p.rank, p.ord, p.rn),
               (select p2.k from picked p2 order by p2.ord desc limit 1)
        into _got, _got_ranks, _last
        from picked p;

        if _got is not null then
            _ids := _ids || _got;
            _ranks := _ranks || _got_ranks;
        end if;
        -- The next claim starts after the furthest key this one took from.
        if _only_ids is null and _l.key_field is not null and _last is not null and _last is distinct from _l.key_cursor then
            update queues.task_limit set key_cursor = _last where task_type = _l.task_type;
        end if;
    end loop;

    if cardinality(_ids) = 0 then
        return;
    end if;
    -- Across limits as within one: lowest rank first, then in each limit's order.
    return query
    select t.task_id
    from queues.task t
    join unnest(_ids, _ranks) with ordinality as c(task_id, rank, pos) on c.task_id = t.task_id
    where t.status = 'pending'
    order by c.rank, c.pos
    limit _want
    for update of t skip locked;
end $$;

-- Takes one token per leased task of a rate-limited type from its bucket. The caller holds the
-- types' limit rows (internal.limited_candidates locked them), so no other claim changes these
-- buckets meanwhile.
create function internal.take_limit_tokens(_task_ids bigint[], _clock timestamptz) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    with taken as (
        select t.limit_name as task_type, t.limit_key, count(*) as n
        from queues.task t
        where t.task_id = any (_task_ids) and t.limit_name is not null
        group by t.limit_name, t.limit_key
    )
    insert into queues.limit_bucket as b (task_type, limit_key, tokens, refilled_at)
    select x.task_type, x.limit_key,
           least(l.burst::double precision,
                 coalesce(o.tokens, l.burst) + l.rate_per_second
                     * greatest(0, extract(epoch from _clock - coalesce(o.refilled_at, _clock)))) - x.n,
           greatest(_clock, coalesce(o.refilled_at, _clock))
    from taken x
    join queues.task_limit l on l.task_type = x.task_type and l.rate_per_second is not null
    left join queues.limit_bucket o on o.task_type = x.task_type and o.limit_key = x.limit_key
    on conflict (task_type, limit_key) do update
    set tokens = excluded.tokens, refilled_at = excluded.refilled_at
$$;

-- claim_tasks (0002, 0007, 0013), same signature and results: the next pending, due tasks in
-- claim order, except that a task of a limited type is handed out only within its limit
-- (queues.set_limit). Unlimited tasks are chosen as before; when limits exist, the limited
-- candidates join them and the first _limit of both, in claim order, are leased.
create or replace function queues.claim_tasks(
    _worker_id text,
    _limit integer,
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _paused text[];
    _limited text[];
    _ids bigint[];
    _lim bigint[];
    _clock timestamptz;
begin
    if _limit is null or _limit < 1 then
        raise exception 'claim_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_tasks: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;

    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);

    _limited := array(select l.task_type from queues.task_limit l);

    -- Unlimited tasks, as before: no limit governs them, and their type has none either.
    _ids := array(
        select t.task_id
        from queues.task t
        where t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
          and (cardinality(_paused) = 0 or t.task_type <> all (_paused))
          and (cardinality(_limited) = 0 or (t.limit_name is null and t.task_type <> all (_limited)))
        order by t.priority desc, t.run_at, t.task_id
        limit _limit
        for update skip locked);

    if cardinality(_limited) > 0 then
        _clock := clock_timestamp();
        _lim := internal.limited_claimable(_limited, _task_types, _paused, _limit, _clock);
        if cardinality(_lim) > 0 then
            _ids := array(
                select t.task_id from queues.task t
                where t.task_id = any (_ids || _lim)
                order by t.priority desc, t.run_at, t.task_id
                limit _limit);
            perform internal.take_limit_tokens(_ids, _clock);
        end if;
    end if;
    if cardinality(_ids) = 0 then
        return;
    end if;

    return query select * from internal.lease_tasks(_worker_id, _ids, _lease_duration);
end $$;

-- Of the limited types _limited, those the claim asked for (_task_types, NULL: any) and not
-- paused: up to _limit of their tasks that the limits let run now, chosen and locked by
-- internal.limited_candidates.
create function internal.limited_claimable(_limited text[], _task_types text[], _paused text[], _limit integer,
                                           _clock timestamptz)
returns bigint[]
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select coalesce(array(select internal.limited_candidates(
        array(select l from unnest(_limited) l
              where (_task_types is null or internal.limit_task_type(l) = any (_task_types))
                and (coalesce(cardinality(_paused), 0) = 0 or internal.limit_task_type(l) <> all (_paused))),
        _limit, null, _clock)), '{}')
$$;

-- Claims up to _limit tasks of limited types only, within their limits, as claim_tasks would
-- (same arguments and results). A worker whose tasks arrive over a transport claims limited tasks
-- with it, since dispatch_tasks does not send them.
create function queues.claim_limited_tasks(
    _worker_id text,
    _limit integer,
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _limited text[] := array(select l.task_type from queues.task_limit l);
    _ids bigint[];
    _clock timestamptz;
begin
    if _limit is null or _limit < 1 then
        raise exception 'claim_limited_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_limited_tasks: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;
    if cardinality(_limited) = 0 then
        return;
    end if;
    perform queues.rescue_expired_leases();
    _clock := clock_timestamp();
    _ids := internal.limited_claimable(_limited, _task_types, array(select qp.task_type from queues.queue_pause qp),
                                       _limit, _clock);
    if cardinality(_ids) = 0 then
        return;
    end if;
    perform internal.take_limit_tokens(_ids, _clock);
    return query select * from internal.lease_tasks(_worker_id, _ids, _lease_duration);
end $$;

-- claim_tasks_by_id (0008, 0013), same signature and results: of the given tasks, those pending
-- and due, except that a task of a limited type is leased only within its limit.
create or replace function queues.claim_tasks_by_id(
    _worker_id text,
    _task_ids bigint[],
    _lease_duration interval default interval '5 minutes',
    _task_types text[] default null)
returns setof queues.task
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp set enable_sort = off set jit = off as $$
declare
    _paused text[];
    _ids bigint[];
    _limited text[];
    _lim bigint[];
    _clock timestamptz;
begin
    if _lease_duration is null or _lease_duration <= interval '0' then
        raise exception 'claim_tasks_by_id: _lease_duration must be positive, got %', _lease_duration
            using errcode = 'invalid_parameter_value';
    end if;
    if coalesce(cardinality(_task_ids), 0) = 0 then
        return;
    end if;

    -- A message redelivered after its worker died finds the task still running under an
    -- expired lease: rescue first, as claim_tasks does (cheap when nothing has expired).
    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);

    _ids := array(
        select t.task_id
        from queues.task t
        where t.task_id = any (_task_ids)
          and t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
          and (cardinality(_paused) = 0 or t.task_type <> all (_paused))
          and t.limit_name is null
          and not exists (select from queues.task_limit l where l.task_type = t.task_type)
        order by t.task_id
        for update);

    _limited := array(
        select l.task_type from queues.task_limit l
        where exists (select from queues.task t where t.task_id = any (_task_ids) and t.limit_name = l.task_type)
          and (_task_types is null or internal.limit_task_type(l.task_type) = any (_task_types))
          and (cardinality(_paused) = 0 or internal.limit_task_type(l.task_type) <> all (_paused)));
    if cardinality(_limited) > 0 then
        _clock := clock_timestamp();
        _lim := array(select internal.limited_candidates(_limited, cardinality(_task_ids), _task_ids, _clock));
        if cardinality(_lim) > 0 then
            perform internal.take_limit_tokens(_lim, _clock);
            _ids := _ids || _lim;
        end if;
    end if;
    if cardinality(_ids) = 0 then
        return;
    end if;

    return query select * from internal.lease_tasks(_worker_id, _ids, _lease_duration);
end $$;

-- What a worker whose claim came back short asks: how long, in seconds, until a task of the
-- given types (NULL: all) that a limit holds back may be claimable. NULL when no due task is
-- held back. Under a rate limit: the time until its bucket's next token, or a quarter of the
-- rate's interval when a token is there (another claim is taking it). Otherwise 0: running
-- slots hold the tasks, and they free when tasks finish: claim again at the worker's shortest
-- poll interval.
create function queues.limit_wait(_task_types text[] default null) returns double precision
language sql stable security definer set search_path = pg_catalog, pg_temp as $$
    with held as (
        select l.rate_per_second as rate,
               least(l.burst::double precision,
                     coalesce(b.tokens, l.burst) + l.rate_per_second
                         * greatest(0, extract(epoch from clock_timestamp() - coalesce(b.refilled_at, clock_timestamp())))) as tokens
        from queues.task_limit l
        cross join lateral (
            -- Up to 64 of the limit's keys with due tasks, by a skip scan of its index.
            with recursive keys(limit_key, n) as (
                select (select t.limit_key from queues.task t
                        where t.limit_name = l.task_type and t.status = 'pending' and t.run_at <= now()
                        order by t.limit_key limit 1), 1
                union all
                select (select t.limit_key from queues.task t
                        where t.limit_name = l.task_type and t.status = 'pending' and t.run_at <= now()
                          and t.limit_key > keys.limit_key
                        order by t.limit_key limit 1), keys.n + 1
                from keys where keys.limit_key is not null and keys.n < 64
            )
            select keys.limit_key from keys where keys.limit_key is not null) k
        left join queues.limit_bucket b on b.task_type = l.task_type and b.limit_key = k.limit_key
        where _task_types is null or internal.limit_task_type(l.task_type) = any (_task_types)
    )
    select case when count(*) = 0 then null
                else coalesce(min(case when h.tokens + internal.limit_slack(h.rate) >= 1 then 0.25 / h.rate
                                       else (1 - internal.limit_slack(h.rate) - h.tokens) / h.rate end)
                                  filter (where h.rate is not null), 0) end
    from held h
$$;

-- dispatch_tasks (0008), same signature and results, except that tasks of limited types are not
-- sent: workers on a transport claim them with claim_limited_tasks.
create or replace function queues.dispatch_tasks(
    _transport text,
    _limit integer default 500,
    _min_window integer default 100,
    _task_types text[] default null)
returns setof bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp set enable_sort = off set jit = off as $$
declare
    _paused text[];
    _limited text[];
    _window integer;
    _ids bigint[];
begin
    if _limit is null or _limit < 1 then
        raise exception 'dispatch_tasks: _limit must be at least 1, got %', _limit using errcode = 'invalid_parameter_value';
    end if;

    perform queues.rescue_expired_leases();

    _paused := array(select qp.task_type from queues.queue_pause qp);
    _limited := array(select l.task_type from queues.task_limit l);
    _window := greatest(coalesce(_min_window, 100),
                        2 * coalesce((select sum(w.pool_size) from queues.worker w where w.transport = _transport), 0))::integer;

    -- The window, in claim order; of it, the tasks not dispatched yet (at most _limit).
    select (array_agg(a.task_id order by a.ord) filter (where not a.dispatched))[1:_limit] into _ids
    from (
        select t.task_id,
               internal.is_dispatched(t.dispatched_at, t.dispatch_lease_id, t.lease_id) as dispatched,
               row_number() over (order by t.priority desc, t.run_at, t.task_id) as ord
        from queues.task t
        where t.status = 'pending'
          and t.run_at <= now()
          and (_task_types is null or t.task_type = any (_task_types))
          and (cardinality(_paused) = 0 or t.task_type <> all (_paused))
          and (cardinality(_limited) = 0 or (t.limit_name is null and t.task_type <> all (_limited)))
        order by t.priority desc, t.run_at, t.task_id
        limit _window
    ) a;
    if coalesce(cardinality(_ids), 0) = 0 then
        return;
    end if;

    return query
    with picked as (
        select t.task_id
        from queues.task t
        where t.task_id = any (_ids)
          and t.status = 'pending'
          and t.run_at <= now()
          and not internal.is_dispatched(t.dispatched_at, t.dispatch_lease_id, t.lease_id)  -- re-checked under the lock
        order by t.task_id
        for update skip locked
    ), upd as (
        update queues.task t
        set dispatched_at = now(), dispatch_lease_id = t.lease_id
        from picked p
        where t.task_id = p.task_id
        returning t.task_id, t.priority, t.run_at
    )
    select u.task_id from upd u
    order by u.priority desc, u.run_at, u.task_id;
end $$;

-- retry_task (0002), same signature, results and errors: a task retried by hand also gets its
-- limit and bucket as the limits are now (they were last set while it was pending or running,
-- under whatever limits there were then).
create or replace function queues.retry_task(_task_id bigint) returns queues.task_status
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
declare
    _t queues.task;
begin
    select * into _t from queues.task where task_id = _task_id for update;
    if not found then
        raise exception 'task % does not exist', _task_id using errcode = 'no_data_found';
    end if;
    if _t.status = 'running' then
        raise exception 'task % is running; cancel it or wait for it to finish before retrying', _task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    if _t.status = 'completed' then
        raise exception 'task % is already completed; enqueue a new task to run it again', _task_id
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    update queues.task
    set status = 'pending', run_at = now(),
        attempt = case when _t.status = 'pending' then attempt else 0 end,
        limit_name = (select l.task_type from internal.limit_of(_t.task_type, _t.payload) l),
        limit_key = (select internal.limit_key(l.key_field, _t.payload) from internal.limit_of(_t.task_type, _t.payload) l
                     where l.task_type is not null)
    where task_id = _task_id;
    insert into queues.task_event (task_id, event, from_status, to_status, lease_id, worker_id, attempt, detail)
    values (_task_id, 'retried', _t.status, 'pending', null, session_user, _t.attempt,
            format('retried by hand after %s attempt(s)', _t.attempt));
    perform pg_notify('taskorch_task', '');
    return 'pending';
end $$;

-- Limit status ----------------------------------------------------------------------------------

-- One row per limit and bucket in use (a bucket with tasks running, due or waiting for tokens):
-- the limit, how many of its tasks run, how many due tasks it holds back, and its tokens now.
create view queues.limit_status as
with buckets as (
    select t.limit_name as task_type, t.limit_key,
           count(*) filter (where t.status = 'running') as running,
           count(*) filter (where t.status = 'pending' and t.run_at <= now()) as held
    from queues.task t
    where t.limit_name is not null and t.status in ('pending', 'running')
    group by t.limit_name, t.limit_key
)
select l.task_type,
       l.max_running,
       l.rate_per_second,
       case when l.rate_per_second is not null then l.burst end as burst,
       l.key_field,
       case when b.limit_key like '=%' then substr(b.limit_key, 2) end as key,
       coalesce(b.limit_key = '*', false) as null_key,
       coalesce(b.running, 0) as running,
       coalesce(b.held, 0) as held,
       case when l.rate_per_second is not null then
           least(l.burst::double precision,
                 coalesce(k.tokens, l.burst) + l.rate_per_second
                     * greatest(0, extract(epoch from clock_timestamp() - coalesce(k.refilled_at, clock_timestamp()))))
       end as tokens
from queues.task_limit l
left join buckets b on b.task_type = l.task_type
left join queues.limit_bucket k on k.task_type = l.task_type and k.limit_key = b.limit_key;
comment on view queues.limit_status is
    'Each limit and each of its buckets in use: running tasks, due tasks held back, tokens now (rate limits). A limit with no task in use shows one row with NULL key.';

-- Privileges ------------------------------------------------------------------------------------
-- Limits are set by the owner or an operator's role it grants them to (docs/limits.md); the
-- worker role claims through claim_tasks and asks for the wait hint.
revoke all on table queues.task_limit, queues.limit_bucket from public;
revoke all on queues.limit_status from public;
revoke all on function
    internal.limit_key(text, jsonb),
    internal.limit_slack(double precision),
    internal.set_inserted_limit_keys(),
    internal.rekey_limited_tasks(text),
    internal.limit_task_type(text),
    internal.limit_of(text, jsonb),
    internal.limited_candidates(text[], integer, bigint[], timestamptz),
    internal.take_limit_tokens(bigint[], timestamptz),
    internal.limited_claimable(text[], text[], text[], integer, timestamptz),
    queues.claim_limited_tasks(text, integer, interval, text[]),
    queues.set_limit(text, integer, double precision, integer, text),
    queues.remove_limit(text),
    queues.limit_wait(text[])
from public;
grant execute on function queues.limit_wait(text[]), queues.claim_limited_tasks(text, integer, interval, text[])
    to worker_service_user;
