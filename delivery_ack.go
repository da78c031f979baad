package taskorch

import "github.com/taskorch/taskorch/internal/transport"

// The hooks the task path calls (executor.go, completer.go); each does nothing without a
// transport.

// toCompleter notes that the task's outcome goes through the completer, which acknowledges its
// messages once the completion is written.
func (d *delivery) toCompleter(taskID int64) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if h := d.held[taskID]; h != nil {
		h.completer = true
	}
	d.mu.Unlock()
}

// taskEnded acknowledges the messages of a task whose outcome execute recorded itself; a task
// without an outcome (lease lost, shutdown) keeps its messages unacknowledged.
func (d *delivery) taskEnded(taskID int64, recorded bool) {
	if d == nil {
		return
	}
	d.mu.Lock()
	h := d.held[taskID]
	if h == nil || (recorded && h.completer) {
		d.mu.Unlock()
		return
	}
	delete(d.held, taskID)
	d.mu.Unlock()
	if recorded {
		d.ack(h.msgs)
	}
}

// completionsFlushed acknowledges the messages of tasks the completer wrote (committed), or
// forgets them when it could not.
func (d *delivery) completionsFlushed(taskIDs []int64, committed bool) {
	if d == nil {
		return
	}
	var msgs []transport.Message
	d.mu.Lock()
	for _, id := range taskIDs {
		if h := d.held[id]; h != nil && h.completer {
			delete(d.held, id)
			msgs = append(msgs, h.msgs...)
		}
	}
	d.mu.Unlock()
	if committed {
		d.ack(msgs)
	}
}
