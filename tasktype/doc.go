// Package tasktype holds the types that both the taskorch API and the worker's machinery use: a
// task (Task, Status), a handler (Handler, HandlerOpts), the control errors a handler returns
// (Snooze, Discard, RateLimited), the causes of a handler's cancellation (ErrLeaseLost,
// ErrTaskCancelled, ErrShutdown), a channel's provider (ChannelProvider, ChannelCall), and the
// hooks through which a worker is observed (Observer).
//
// It is a leaf: it imports nothing of taskorch's but a string helper, so that package taskorch
// and the worker's machinery under internal/ can both depend on it without a cycle (River's
// rivertype plays the same part). Package taskorch re-exports every name here with a type alias
// or a forwarding function: programs use taskorch.Task, taskorch.Snooze, and so on; packages
// that observe a worker (contrib/prometheus, contrib/otel) import this one.
package tasktype
