-- A hard bound on a task's payload, whoever enqueues it (SQL, the Go client, a bulk load): 8 MiB
-- as stored. Workers load payloads into memory; a 100 MB payload enqueued by mistake (or by an
-- attacker) is refused at the door instead of starving every worker that claims it. The Go
-- client refuses payloads over 1 MiB by default before sending them (ClientConfig.MaxPayloadBytes).
-- pg_column_size reads the datum's header: the check costs next to nothing per row.
-- (NOT VALID: existing rows are not rescanned; every new row is checked.)
alter table queues.task add constraint task_payload_size
    check (pg_column_size(payload) <= 8 * 1024 * 1024) not valid;
