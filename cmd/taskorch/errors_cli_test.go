package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/dbtest"
)

// Every error is printed once, on its first line, with one "taskorch: " prefix, in words a
// user reads: no Go package names (strconv.ParseInt, time:) from the flag parser.
func TestErrorsPrintedOnceWithOnePrefix(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", dbtest.NewDBURL(t)}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"enqueue", "report", `{}`, "--priority", "abc"}, exitUsage, `invalid argument "abc" for --priority: not a whole number`},
		{[]string{"enqueue", "report", `{}`, "--priority", "1.5"}, exitUsage, `invalid argument "1.5" for --priority: not a whole number`},
		{[]string{"worker", "--lease-duration", "5"}, exitUsage, `invalid argument "5" for --lease-duration: not a duration such as 30s, 5m or 1h30m`},
		{[]string{"worker", "--migrate=maybe"}, exitUsage, `invalid argument "maybe" for --migrate: not true or false`},
		{[]string{"limits", "set", "email", "--rate", "fast"}, exitUsage, `invalid argument "fast" for --rate: not a number`},
		{[]string{"enqueue", "report", `{}`, "--at", "tomorrow"}, exitUsage, `--at "tomorrow" is not an RFC 3339 timestamp such as 2030-01-02T15:04:05Z`},
		{[]string{"tasks", "list", "--bogus"}, exitUsage, "unknown flag: --bogus (see 'taskorch tasks list --help')"},
		{[]string{"tasks", "list", "-z"}, exitUsage, "unknown shorthand flag: 'z' in -z (see 'taskorch tasks list --help')"},
		{[]string{"enqueue", "report", `{}`, "--priority"}, exitUsage, "flag needs an argument: --priority"},
		// The library's errors carry "taskorch: " themselves.
		{[]string{"enqueue", "bad type", `{}`}, exitUsage, `task type "bad type" is malformed: use 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter`},
		{[]string{"tasks", "show", "999999"}, exitNotFound, "get task 999999: task not found"},
	} {
		r := run(t, append(append([]string{tc.args[0]}, db...), tc.args[1:]...)...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.err)
		require.Equal(t, "taskorch: "+tc.want+"\n", r.err, tc.args)
		for _, pkg := range []string{"strconv", "time:", "ParseInt", "ParseFloat", "ParseBool"} {
			require.NotContains(t, r.err, pkg, tc.args)
		}
	}
}

func TestPrintError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("plain"), "taskorch: plain\n"},
		{taskorch.ErrNotFound, "taskorch: task not found\n"},
		{fmt.Errorf("enqueue: %w", taskorch.ErrInvalidInput), "taskorch: enqueue: invalid input\n"},
		{errors.Join(taskorch.ErrNotFound, taskorch.ErrWrongState), "taskorch: task not found\noperation not allowed in the task's status\n"},
	} {
		var b strings.Builder
		printError(&b, tc.err)
		require.Equal(t, tc.want, b.String())
	}
}
