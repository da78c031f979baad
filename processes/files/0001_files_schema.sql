-- The files process set: stored objects (bucket, object_key) and the file-deletion process
-- (seed 002: "In the file deletion flow"). Installed with `taskorch migrate up --processes files`;
-- see docs/processes.md.

create schema if not exists files;
comment on schema files is 'taskorch processes: stored files and their deletion (docs/processes.md)';

-- A stored object. metadata is free-form; files.mark_file_deleted sets "deleted": true in it.
create table files.file (
    file_id          bigint generated always as identity primary key,
    bucket           text not null check (bucket <> ''),
    object_key       text not null check (object_key <> ''),
    owner_account_id bigint,          -- the account that owns it, if any (see the accounts set)
    metadata         jsonb not null default '{}'::jsonb check (jsonb_typeof(metadata) = 'object'),
    created_at       timestamptz not null default now(),
    unique (bucket, object_key)
);
create index file_owner_idx on files.file (owner_account_id) where owner_account_id is not null;

-- Settings of the deletion process (see comms.process_config for what each means).
create table files.process_config (
    process        text primary key check (process in ('file_deletion')),
    max_attempts   integer  not null check (max_attempts > 0),
    backoff_base   interval not null check (backoff_base >= interval '0'),
    backoff_max    interval not null check (backoff_max >= interval '0'),
    check_interval interval not null check (check_interval > interval '0')
);
insert into files.process_config values ('file_deletion', 5, interval '10 seconds', interval '10 minutes', interval '30 seconds');

-- Marks a file logically deleted (the object is gone from storage). Idempotent.
create function files.mark_file_deleted(_file_id bigint) returns void
language sql volatile security definer set search_path = pg_catalog, pg_temp as $$
    update files.file
    set metadata = metadata || jsonb_build_object('deleted', true, 'deleted_at', now())
    where file_id = _file_id and not coalesce((metadata ->> 'deleted')::boolean, false);
$$;

revoke all on all tables in schema files from public;
revoke all on function files.mark_file_deleted(bigint) from public;
