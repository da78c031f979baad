package worker

// outcomeRecorded is the task path's one call into the transport (from finish, outcome.go, and
// for a task that leaves the buffer without starting, from dropped, buffer.go):
// it acknowledges the messages of a task whose outcome is committed, and forgets, without
// acknowledging, those of a task without one (lease lost, shutdown, the write failed): the
// transport delivers them again, and the claim decides. It does nothing without a transport.
func (d *delivery) outcomeRecorded(taskID int64, committed bool) {
	if d == nil {
		return
	}
	d.mu.Lock()
	h := d.held[taskID]
	delete(d.held, taskID)
	d.mu.Unlock()
	if h != nil && committed {
		d.ack(h.msgs)
	}
}
