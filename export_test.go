package taskorch

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
