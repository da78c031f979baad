// Package maintenance is what every taskorch worker runs beside its task loop: it registers the
// worker in queues.worker — on a session of its own, a connection whose death tells the leader
// at once that the worker died (Config.Session) — and keeps it alive with heartbeats, competes
// for the leader lease, and, while it holds the lease, does the leader's work — recovering the
// tasks of workers whose session is gone or that stopped heartbeating, pruning finished tasks
// past retention, and enqueueing periodic schedules' ticks.
//
// Everything is decided in PostgreSQL (the functions under migrations/core/functions/queues/:
// acquire_leadership.sql, reap_lost_sessions.sql, reap_dead_workers.sql, ...): the lease is a row
// whose term grows at each change of leader, and every leader action carries the term it was
// elected with, so a leader that lost its lease (paused, partitioned, slow) cannot act with it.
// A schedule's tick is enqueued with an idempotency key naming the schedule and the tick, so two
// leaders that overlap still enqueue it once.
//
// A Maintainer survives database restarts: every call is retried on its next interval.
//
//	m, err := maintenance.New(pool, maintenance.Config{WorkerID: id, PoolSize: 10})
//	go m.Run(ctx) // returns when ctx is done, after resigning and deregistering
//
// Reading and changing that state from outside a worker (listing the workers, adding and removing
// schedules) is package admin, for the CLI, the dashboard and the Client. docs/operations.md
// describes the behaviour and its defaults.
package maintenance
