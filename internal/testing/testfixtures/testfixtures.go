// Package testfixtures holds SQL fixtures for tests: business functions the worker's tests run
// and tables they check. It is imported by tests only.
package testfixtures

// WorkerSQL creates schema wbiz, granted to worker_service_user: a supervisor that enqueues a
// child, functions that fail in each way a function can, a slow one, channel handlers, and the
// tables they write (wbiz.effect, wbiz.channel_fact) or read (wbiz.sleep_control).
const WorkerSQL = `
create schema wbiz;
create table wbiz.effect (id serial primary key, note text not null);
create function wbiz.supervisor(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into wbiz.effect (note) values (_p->>'note');
    perform queues.enqueue(coalesce(_p->>'child_type', 'child'), jsonb_build_object('parent', _p->>'note'));
    return jsonb_build_object('status', 'succeeded');
end $$;
create function wbiz.invalid(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into wbiz.effect (note) values ('invalid ran');
    return jsonb_build_object('success', false, 'validation_failure_message', 'account 7 does not exist');
end $$;
create function wbiz.named_status(_p jsonb) returns jsonb
language sql security definer set search_path = pg_catalog, pg_temp as $$
    select jsonb_build_object('status', 'max_attempts_reached')
$$;
create function wbiz.raises(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into wbiz.effect (note) values ('raises ran');
    raise exception 'boom %', _p->>'n';
end $$;
create function wbiz.garbage(_p jsonb) returns jsonb
language sql security definer set search_path = pg_catalog, pg_temp as $$ select '[1,2]'::jsonb $$;
create function wbiz.slow(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform pg_sleep(30);
    return '{"status":"succeeded"}';
end $$;
-- Writes an effect, then sleeps as long as wbiz.sleep_control says: a test makes the first run
-- hang (and kills its worker), then lets the next run through.
create table wbiz.sleep_control (ms integer not null);
insert into wbiz.sleep_control values (0);
create function wbiz.effect_then_sleep(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into wbiz.effect (note) values (_p->>'note');
    perform pg_sleep((select ms from wbiz.sleep_control) / 1000.0);
    return '{"status":"succeeded"}';
end $$;
-- Channel handlers: before builds the provider request, on_success and on_error record a fact.
create table wbiz.channel_fact (id serial primary key, kind text not null, body jsonb not null);
create function wbiz.before(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if _p->>'to' is null then
        return jsonb_build_object('success', false, 'validation_failure_message', 'no recipient');
    end if;
    return jsonb_build_object('success', true, 'payload', jsonb_build_object('to_address', _p->>'to', 'subject', 'hi'));
end $$;
create function wbiz.on_success(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into wbiz.channel_fact (kind, body) values ('success', _p);
    return jsonb_build_object('status', 'succeeded');
end $$;
create function wbiz.on_error(_p jsonb) returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into wbiz.channel_fact (kind, body) values ('error', _p);
    return jsonb_build_object('status', 'succeeded');
end $$;
grant usage on schema wbiz to worker_service_user;
grant execute on all functions in schema wbiz to worker_service_user;
`
