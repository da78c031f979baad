// Command taskorch runs and operates taskorch: the dev environment, migrations, workers and the
// operator's commands. Run `taskorch help` for the list; docs/cli.md has every command.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	printError(os.Stderr, err)
	os.Exit(exitCode(err))
}

// printError prints err on one line with one "taskorch: " prefix. The library's errors carry
// that prefix already, as Go packages' errors do; printed after the command's, it would stutter
// ("taskorch: taskorch: invalid input"), at the start or after a wrapping context.
func printError(w io.Writer, err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	for strings.HasPrefix(msg, errPrefix) {
		msg = strings.TrimPrefix(msg, errPrefix)
	}
	msg = strings.ReplaceAll(msg, ": "+errPrefix, ": ")
	msg = strings.ReplaceAll(msg, "\n"+errPrefix, "\n")
	fmt.Fprintln(w, errPrefix+msg)
}

const errPrefix = "taskorch: "

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
