package taskorch

import "time"

// MapPgError exposes mapError to the tests.
var MapPgError = mapError

// HandlerFor exposes a registered handler to the tests.
func (hs *Handlers) HandlerFor(taskType string) (Handler, bool) {
	e, ok := hs.lookup(taskType)
	return e.h, ok
}

// HandlerOptsFor exposes a registered handler's options to the tests.
func (hs *Handlers) HandlerOptsFor(taskType string) (HandlerOpts, bool) {
	e, ok := hs.lookup(taskType)
	return e.opts, ok
}

// SetWaitRecheck sets how often c's Wait reads a task's status again while it waits: a test sets
// it to hours to prove that a Wait returned because it was notified.
func SetWaitRecheck(c *Client, d time.Duration) { c.waits.recheck = d }

// WaitersOf is how many Waits c's listener serves now.
func WaitersOf(c *Client) int {
	c.waits.mu.Lock()
	defer c.waits.mu.Unlock()
	if c.waits.l == nil {
		return 0
	}
	return c.waits.l.n
}

// SetWaitLinger sets how long c's LISTEN connection stays open after the last Wait returned.
func SetWaitLinger(c *Client, d time.Duration) { c.waits.linger = d }

// WaitListening reports whether c's LISTEN connection is open (or opening).
func WaitListening(c *Client) bool {
	c.waits.mu.Lock()
	defer c.waits.mu.Unlock()
	return c.waits.l != nil
}
