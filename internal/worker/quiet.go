package worker

import (
	"time"

	"github.com/taskorch/taskorch/tasktype"
)

// Quiet (docs/operations.md, "Quieting a worker"): an operator's queues.quiet_worker reaches this
// process with its next heartbeat (the maintainer's EventHeartbeat says Quiet). While quiet, the
// fetch loop sends no claim and gives back what it claimed ahead that has not started
// (fetcher.quietDown); the running tasks finish and record their outcomes as usual, and the
// maintenance duties (heartbeats, leadership) go on. A heartbeat that no longer says quiet
// (queues.resume_worker) lets it claim again at once.

// setQuiet records what the latest heartbeat said, and tells the fetch loop when it changed.
func (w *Worker) setQuiet(quiet bool) {
	if w.quiet.Swap(quiet) == quiet {
		return
	}
	if quiet {
		w.log.Info("quieted by an operator: finishing the running tasks, claiming nothing more", "running", len(w.slots))
	} else {
		w.log.Info("resumed by an operator: claiming again")
	}
	w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventQuiet, On: quiet})
	select {
	case w.quietChanged <- struct{}{}:
	default:
	}
}

// quietDown gives back the tasks the buffer holds that have not started, while the worker is
// quiet: another worker claims them.
func (f *fetcher) quietDown() {
	left := f.w.ready.removeOlder(time.Time{}, true)
	f.w.releaseBuffered(f.inner, left, "quieted by an operator before the task started")
}
