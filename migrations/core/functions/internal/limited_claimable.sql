-- Of the limited types _limited, those the claim asked for (_task_types, NULL: any) and not
-- paused: up to _limit of their tasks that the limits let run now, chosen and locked by
-- internal.limited_candidates.
create or replace function internal.limited_claimable(_limited text[], _task_types text[], _paused text[], _limit integer,
                                           _clock timestamptz)
returns bigint[]
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    select coalesce(array(select internal.limited_candidates(
        array(select l from unnest(_limited) l
              where (_task_types is null or internal.limit_task_type(l) = any (_task_types))
                and (coalesce(cardinality(_paused), 0) = 0 or (internal.limit_task_type(l) <> all (_paused) and l <> all (_paused)))),
        _limit, null, _clock)), '{}')
$$;
revoke all on function internal.limited_claimable(text[], text[], text[], integer, timestamp with time zone) from public;
