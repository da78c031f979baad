// Package kit joins package taskorchtest to what package taskorch keeps unexported: the worker
// configuration it makes of a WorkerConfig (its defaults applied, its handlers wrapped for the
// worker), so that taskorchtest runs a task through the worker's own path (worker.RunOne) with
// what a worker of that configuration would have. Package taskorch sets the hooks when it is
// initialised; nothing else may.
package kit

import "github.com/taskorch/taskorch/internal/worker"

// WorkerConfig returns the worker.Config that taskorch.NewWorker makes of cfg, a
// *taskorch.WorkerConfig (nil for the defaults), checked and with its defaults applied; an error
// says what in cfg cannot work. Set by package taskorch.
var WorkerConfig func(cfg any) (worker.Config, error)
