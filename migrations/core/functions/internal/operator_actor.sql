-- The actor recorded for an operator's action: _actor trimmed, or the database role when it is
-- NULL or blank. At most 200 characters, no control characters.
create or replace function internal.operator_actor(_label text, _actor text)
returns text
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
begin
    if _actor is null or btrim(_actor) = '' then
        return session_user::text;
    end if;
    if length(btrim(_actor)) > 200 or _actor ~ '[[:cntrl:]]' then
        raise exception '%: _actor must be at most 200 characters without control characters, got %', _label,
            to_jsonb(left(_actor, 210))::text using errcode = 'invalid_parameter_value';
    end if;
    return btrim(_actor);
end $$;
revoke all on function internal.operator_actor(text, text) from public;
