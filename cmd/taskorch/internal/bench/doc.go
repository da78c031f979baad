// Package bench is the machinery of `taskorch bench`: it measures the queue and the worker on
// the database it is given, in six modes.
//
//   - Throughput: N no-op tasks bulk-enqueued, then worked by in-process workers (or, Steady,
//     enqueued while they are worked, for a duration); tasks per second.
//   - Latency: tasks enqueued one by one at a fixed rate; enqueue→start and enqueue→complete
//     percentiles.
//   - Backlog: Throughput on an empty table, then again with M finished tasks (and their lease
//     and event history) in the tables; the ratio.
//   - Processes: N supervised email sends (comms.send_email) with the outbox provider, until every
//     one has a terminal fact; processes per second.
//   - Memory: the RSS of a separate `taskorch worker` process running 100 sleeping tasks.
//   - Slots: a backlog worked by W slots whose handlers sleep a fixed time; tasks per second
//     and slot utilisation (tasks × work ÷ (wall time × W)).
//
// Open prepares the database: by default it creates a database of its own on the same server
// (taskorch_bench_<random>), migrates it and drops it at Close; when the user may not create
// databases (or Options.InPlace is set) it works in the given database, refuses to start if
// tasks are waiting there, and deletes the rows it made at Close.
//
// The figures and the method are in docs/benchmarks.md.
package bench
