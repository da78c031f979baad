-- A crashed worker is found by the death of its database session, not by the silence of its
-- heartbeats (docs/operations.md, "Crashed workers"; docs/guarantees.md).
--
-- Each worker holds one connection of its own for its life (its session), and on it a
-- session-level advisory lock (class internal.worker_session_class(), key session_key) that it
-- takes when it registers. PostgreSQL releases the lock the moment the session ends, whichever
-- way it ends: the process was killed (its sockets close), the machine rebooted (the server's
-- keepalive finds it), the connection was cut. So whether a worker lives is one probe of its
-- lock: internal.worker_session_state. The leader runs queues.reap_lost_sessions every 250 ms
-- (one statement, no write while every session is alive): a worker whose session has been gone
-- for the grace (1 s by default) loses its running tasks, recovered as the heartbeat reaper
-- recovers them — fenced by their lease ids, so the worker's late outcome is refused. The grace
-- lets a live worker whose connection merely dropped take its lock again (register on a new
-- session) and keep its tasks. Followers try queues.acquire_leadership every 500 ms: it takes
-- the lease at once from a leader whose session is gone.
--
-- Where sessions cannot tell, heartbeats still decide (queues.reap_dead_workers, unchanged
-- apart from the cause it records): a worker without a session (PollOnly, behind a transaction
-- pooler: session_key is NULL), a stopped (SIGSTOP) or partitioned worker whose session the
-- server still holds, and the rows registered before PostgreSQL restarted or failed over
-- (session_epoch: the lock they name is another server's), until their workers register again.
--
-- Also here: a worker id is registered by one process at a time. queues.register_worker_instance
-- names the process (instance): a new process under the id of one that is gone takes over and
-- recovers its tasks at once; while that one lives it is refused (55006). Leadership is for a
-- registered, live worker and for at most an hour at a time; a claim needs a worker id.

-- The registry ---------------------------------------------------------------------------------

alter table queues.worker
    add column instance text,
    add column session_key integer,
    add column session_pid integer,
    add column session_epoch timestamptz,
    add column session_lost_at timestamptz,
    add constraint worker_instance_valid check (length(instance) between 1 and 128),
    add constraint worker_session_complete
        check ((session_key is null) = (session_pid is null) and (session_key is null) = (session_epoch is null)),
    add constraint worker_session_lost_has_session check (session_lost_at is null or session_key is not null);

comment on column queues.worker.instance is
    'The worker process that registered the id (random, one per process); NULL when registered with queues.register_worker.';
comment on column queues.worker.session_key is
    'The advisory lock (internal.worker_session_class(), session_key) the worker''s session holds while it lives; NULL: no session, heartbeats alone tell.';
comment on column queues.worker.session_pid is
    'The backend pid of the worker''s session (pg_stat_activity.pid).';
comment on column queues.worker.session_epoch is
    'pg_postmaster_start_time() when the session registered: the lock is only meaningful on that server.';
comment on column queues.worker.session_lost_at is
    'When the leader first found the worker''s session gone; its tasks are recovered once this is older than the grace.';
comment on table queues.worker is
    'One row per live worker. A worker with a session (session_key) is dead once its session is gone; one without, once its heartbeat is older than the worker timeout. The leader deletes dead workers and recovers their tasks.';

create sequence queues.worker_session_key_seq as integer minvalue 1 cycle;

-- The functions (internal.worker_session_class, worker_session_state, recover_worker_tasks;
-- queues.register_worker_instance, register_worker, the heartbeat_worker, deregister_worker and
-- acquire_leadership of a process instance, reap_lost_sessions, reap_dead_workers,
-- internal.lease_tasks, release_worker_tasks) are in their files under functions/.

revoke all on sequence queues.worker_session_key_seq from public;
