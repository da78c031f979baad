package taskorch

// MapPgError exposes mapError to the tests.
var MapPgError = mapError
