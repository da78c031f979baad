package taskorch

// MapPgError exposes mapError to the tests.
var MapPgError = mapError

// HandlerFor exposes a registered handler to the tests.
func (hs *Handlers) HandlerFor(taskType string) (Handler, bool) { return hs.lookup(taskType) }
