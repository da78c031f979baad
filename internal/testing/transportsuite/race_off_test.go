//go:build !race

package transportsuite_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
