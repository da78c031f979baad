package worker

import (
	"time"

	"github.com/taskorch/taskorch/tasktype"
)

// Running long (docs/operations.md, "Find a stuck task"): an attempt still running after its
// type's threshold is logged as a warning, once, and reported to the observers
// (taskorch_tasks_running_long_total), so a stuck handler shows before its lease or timeout ends
// it. One timer per attempt, only where a threshold applies; stopped when the attempt returns.

// warnAfter is the threshold of an attempt of taskType: the handler's WarnAfter, else the
// worker's threshold for the type, else its default; 0 for none.
func (w *Worker) warnAfter(taskType string, opts tasktype.HandlerOpts) time.Duration {
	switch {
	case opts.WarnAfter < 0:
		return 0
	case opts.WarnAfter > 0:
		return opts.WarnAfter
	}
	if d, ok := w.cfg.WarnRunningAfterBy[taskType]; ok {
		return max(d, 0)
	}
	return w.cfg.WarnRunningAfter
}

// runningLong warns that r has run longer than d, unless its outcome is being recorded already.
func (w *Worker) runningLong(r *runningTask, d time.Duration) {
	if r.recording.Load() {
		return
	}
	w.taskLogger(r.task).Warn("task running longer than expected", "running", time.Since(r.started).Round(time.Millisecond), "warn_after", d)
	w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventRunningLong, Task: r.task})
}

// longestRunning reports, for each type with attempts running now, how long the longest has
// run (WorkerInfo.LongestRunning).
func (w *Worker) longestRunning() map[string]time.Duration {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Duration, len(w.running))
	for _, r := range w.running {
		if d := now.Sub(r.started); d > out[r.task.Type] {
			out[r.task.Type] = d
		}
	}
	return out
}
