package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommandFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, exe, onPath, cwd, want string
	}{
		{"make demo, from the checkout", "/src/taskorch/bin/taskorch", "", "/src/taskorch", "bin/taskorch"},
		{"the one PATH finds", "/home/ann/go/bin/taskorch", "/home/ann/go/bin/taskorch", "/src/taskorch", "taskorch"},
		{"another taskorch on PATH", "/src/taskorch/bin/taskorch", "/usr/local/bin/taskorch", "/src/taskorch", "bin/taskorch"},
		{"in the working directory", "/src/taskorch/taskorch", "", "/src/taskorch", "./taskorch"},
		{"outside the working directory", "/src/taskorch/bin/taskorch", "", "/tmp", "/src/taskorch/bin/taskorch"},
		{"a sibling directory", "/src/taskorch/bin/taskorch", "", "/src/taskorch/docs", "/src/taskorch/bin/taskorch"},
		{"no working directory", "/src/taskorch/bin/taskorch", "", "", "/src/taskorch/bin/taskorch"},
		{"a path the shell would split", "/home/ann/my code/bin/taskorch", "", "/tmp", "'/home/ann/my code/bin/taskorch'"},
		{"a quote in the path", "/home/ann/ann's/taskorch", "", "/", `'home/ann/ann'\''s/taskorch'`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, commandFor(c.exe, c.onPath, c.cwd))
		})
	}
}
