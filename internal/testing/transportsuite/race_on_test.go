//go:build race

package transportsuite_test

// raceEnabled reports whether the tests run under the race detector, which makes the worker
// several times slower: load tests scale their task counts down by it, not their checks.
const raceEnabled = true
