// Command taskorch runs and operates taskorch: the dev environment, migrations, workers and the
// operator's commands. Run `taskorch help` for the list; docs/cli.md has every command.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskorch:", err)
	}
	os.Exit(exitCode(err))
}

// Exit codes (docs/cli.md):
//
//	0  success
//	1  failure: the database is unreachable, a statement failed, ...
//	2  bad usage or input: unknown flag, malformed JSON payload, bad timestamp, ...
//	3  not found: no task with that id, no schedule with that name
//	4  not allowed in the task's current status (retrying a running task, ...)
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitNotFound = 3
	exitState    = 4
)

// usageError marks an error as the caller's mistake (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), isInputError(err):
		return exitUsage
	case isNotFound(err):
		return exitNotFound
	case isWrongState(err):
		return exitState
	default:
		return exitFailure
	}
}
