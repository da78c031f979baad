// Package chaos is taskorch's fault-injection harness (`make chaos`, docs/testing.md "Chaos").
//
// Run starts a private PostgreSQL (internal/pgcluster), toxiproxy in front of it, a
// redis-server, and a fleet of `taskorch worker` processes that reach PostgreSQL only through
// toxiproxy. A producer enqueues a mixed workload at a steady rate — no-op and sleeping Go
// tasks, db_function tasks that record an effect (some enqueueing a child), and email
// processes delivered through the outbox provider — while two lanes of faults run:
//
//   - the process lane SIGKILLs random workers (and starts them again) and pauses them with
//     SIGSTOP past their lease before SIGCONT;
//   - the network lane restarts PostgreSQL (fast shutdown, or a crash with SIGQUIT), adds
//     latency and connection resets through toxiproxy, disables the proxy for a while,
//     restarts Redis under the Redis transport, and cuts workers that live in network
//     namespaces of their own (veth pairs) off from the database, then heals them.
//
// The run has three phases: the PostgreSQL transport, the Redis transport, and workers in
// network namespaces. Then faults stop, the fleet drains the queue, and Check proves from the
// database alone that nothing was lost and nothing happened twice (checker.go). Report prints
// the table.
package chaos
