// Package worker is how a task is run: the machinery behind taskorch.Worker. Read it top to
// bottom, in the order a task goes through it (docs/worker.md tells the same story for users):
//
//	worker.go       New and Run: the components, started in order and stopped in reverse
//	fetch.go        the one fetch loop: when to claim, how many, from which source (the due
//	                tasks, a transport's deliveries, the limited types)
//	claim.go        the one claim path: the claim statements, and reading what they return
//	delivery.go     a transport's side: receiving ids, dispatching, acknowledging
//	buffer.go       the claimed tasks waiting for a slot, claiming ahead, and the starter: the
//	                one place a task starts
//	batch.go        a batch handler's tasks started together, and its one call for them
//	executor.go     a task's goroutine and context; the branch for its type: a Go handler here,
//	db_function.go  a SQL function in the task's lease-locked transaction,
//	channel.go      a channel's provider call between its before, success and error handlers
//	                (before_batch.go runs the before handlers in batches)
//	outcome.go      the outcome a branch returns; record has it written, finish observes it
//	completer.go    the completions, batched
//	writer.go       the outcome writer: the one file that writes outcomes to the database
//	renewer.go      the running and buffered tasks' leases, extended
//	lease_check.go  the one path that stops a task whose lease is gone (a cancel, a takeover)
//	listen.go       LISTEN: wake-ups (and saying the worker waits for one) and cancellations
//	observe.go      the observers (metrics, traces), told after each commit
//	run_one.go      one task through run, without a worker running (package taskorchtest's
//	                Work), its outcome written by writer.go's WriteOutcome
//
// The package imports the shared types of package tasktype and never package taskorch: the
// API sits on top of it (docs/design.md, "The map of the house").
package worker
