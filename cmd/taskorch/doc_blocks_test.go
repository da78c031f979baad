package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docBlock is the fenced block after the marker line "<!-- example: name -->" of docs/doc, with
// its last newline: the tests that run what the documents print read it with this.
func docBlock(t *testing.T, doc, name string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("../../docs", doc))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(text), "\n<!-- example: "+name+" -->\n```")
	require.True(t, ok, "docs/%s has no example %q", doc, name)
	_, rest, ok = strings.Cut(rest, "\n")
	require.True(t, ok)
	block, _, ok := strings.Cut(rest, "\n```\n")
	require.True(t, ok, "example %q is not closed", name)
	return block + "\n"
}
