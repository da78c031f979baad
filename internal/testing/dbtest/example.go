package dbtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// ExampleTB is a testing.TB for runnable examples, which get none: failures panic, and
// cleanups run when Main ends. Only the methods the harness uses are implemented.
type ExampleTB struct {
	testing.TB // nil: any other method panics
}

var (
	exampleMu       sync.Mutex
	exampleCleanups []func()
)

// Helper does nothing.
func (*ExampleTB) Helper() {}

// Name names the example's databases.
func (*ExampleTB) Name() string { return "Example" }

// Context returns a background context: an example has no deadline of its own.
func (*ExampleTB) Context() context.Context { return context.Background() }

// Logf discards the message.
func (*ExampleTB) Logf(string, ...any) {}

// Errorf panics: an example cannot carry on after a setup error.
func (*ExampleTB) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Fatal panics.
func (*ExampleTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

// Fatalf panics.
func (*ExampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Cleanup registers fn to run when Main ends.
func (*ExampleTB) Cleanup(fn func()) {
	exampleMu.Lock()
	defer exampleMu.Unlock()
	exampleCleanups = append(exampleCleanups, fn)
}

// runExampleCleanups runs the registered cleanups, last first.
func runExampleCleanups() {
	exampleMu.Lock()
	fns := exampleCleanups
	exampleCleanups = nil
	exampleMu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}
