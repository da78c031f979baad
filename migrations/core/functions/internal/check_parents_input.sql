-- Checks an enqueue's _after and _on_parent_failure (docs/workflows.md) and returns the parents to
-- attach: NULL for none (NULL or an empty array). 22023, naming the argument: a NULL element,
-- more than 10,000 parents, a policy other than 'cancel' or 'run'.
create or replace function internal.check_parents_input(_label text, _after bigint[], _on_parent_failure text)
returns bigint[]
language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
begin
    if _after is null then
        return null;
    end if;
    if _on_parent_failure is null or _on_parent_failure not in ('cancel', 'run') then
        raise exception '%: _on_parent_failure must be ''cancel'' or ''run'', not %', _label, coalesce(quote_literal(_on_parent_failure), 'NULL')
            using errcode = 'invalid_parameter_value';
    end if;
    if array_position(_after, null) is not null then
        raise exception '%: _after must not contain NULL', _label using errcode = 'invalid_parameter_value';
    end if;
    if cardinality(_after) > 10000 then
        raise exception '%: _after names % tasks; at most 10000', _label, cardinality(_after)
            using errcode = 'invalid_parameter_value';
    end if;
    return nullif(_after, '{}');
end $$;
revoke all on function internal.check_parents_input(text, bigint[], text) from public;
