-- The comms process set: messages (email and SMS) and the settings of their send processes.
-- Installed with `taskorch migrate up --processes comms`; see docs/processes.md.

create schema if not exists comms;
comment on schema comms is 'taskorch processes: sending email and SMS (docs/processes.md)';

-- A message to send, by channel (seed 000: comms.message with channel in ('email','sms')).
create table comms.message (
    message_id bigint generated always as identity primary key,
    channel    text not null check (channel in ('email', 'sms')),
    created_at timestamptz not null default now()
);

create table comms.email_message (
    message_id   bigint primary key references comms.message,
    to_address   text not null,
    from_address text,             -- null: the provider's configured sender
    subject      text not null,
    text_body    text,
    html_body    text,
    constraint email_message_has_body check (text_body is not null or html_body is not null)
);

create table comms.sms_message (
    message_id bigint primary key references comms.message,
    to_number  text not null,
    from_number text,              -- null: the provider's configured number
    body       text not null
);

-- Per-process settings, read by each supervisor run; an operator may change them at any time.
--   max_attempts    attempts before the process gives up (seed 000's story allows one retry: 2)
--   backoff_base    wait after the first failure; doubled per further failure ...
--   backoff_max     ... up to this
--   check_interval  how often the supervisor looks again while an attempt is outstanding (the
--                   handlers also wake it the moment an attempt ends)
create table comms.process_config (
    process        text primary key check (process in ('send_email', 'send_sms')),
    max_attempts   integer  not null check (max_attempts > 0),
    backoff_base   interval not null check (backoff_base >= interval '0'),
    backoff_max    interval not null check (backoff_max >= interval '0'),
    check_interval interval not null check (check_interval > interval '0')
);

insert into comms.process_config values
    ('send_email', 3, interval '10 seconds', interval '10 minutes', interval '30 seconds'),
    ('send_sms',   3, interval '10 seconds', interval '10 minutes', interval '30 seconds');

revoke all on all tables in schema comms from public;
