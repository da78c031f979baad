-- Erases an account's personal data and flags it 'anonymized'. Idempotent.
create or replace function accounts.anonymize_account(_account_id bigint) returns void
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp as $$
begin
    update accounts.account
    set email = null, display_name = null
    where account_id = _account_id;
    if not found then
        raise exception 'anonymize_account: account % does not exist', _account_id using errcode = 'no_data_found';
    end if;
    insert into accounts.account_flag (account_id, flag) values (_account_id, 'anonymized') on conflict do nothing;
end $$;
revoke all on function accounts.anonymize_account(bigint) from public;
