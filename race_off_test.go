//go:build !race

package taskorch_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
