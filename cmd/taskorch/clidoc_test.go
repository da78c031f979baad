package main

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md from the commands' help")

// docs/cli.md is the commands' own help; this keeps it in sync. After changing a command:
//
//	go test ./cmd/taskorch -run TestCLIDoc -update
func TestCLIDoc(t *testing.T) {
	t.Setenv("DATABASE_URL", "") // the flag defaults must not show this machine's environment
	var buf bytes.Buffer
	require.NoError(t, writeCLIDoc(&buf, newRootCmd()))
	const path = "../../docs/cli.md"
	if *update {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), buf.String(), "docs/cli.md is stale: go test ./cmd/taskorch -run TestCLIDoc -update")
}
