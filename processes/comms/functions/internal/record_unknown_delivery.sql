-- Records an unknown provider message id in queues.error (no task: it names none we know).
create or replace function internal.record_unknown_delivery(_label text, _what text, _provider_message_id text, _event text) returns void
language sql volatile set search_path = pg_catalog, pg_temp as $$
    insert into queues.error (task_id, error_message, context)
    values (null,
            format('%s: no %s attempt has provider message id %s (event %s); nothing recorded',
                   _label, _what, quote_literal(left(_provider_message_id, 256)), _event),
            jsonb_build_object('source', _label, 'provider_message_id', left(_provider_message_id, 256), 'event', _event));
$$;
revoke all on function internal.record_unknown_delivery(text, text, text, text) from public;
