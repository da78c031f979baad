package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/scaffold"
)

// The checked-in kit files are exactly what the kit renders, and no generated function or view
// file is left that the kit no longer renders: change the kit, run genkit, and commit both (a
// change of the kit's tables as a new migration once the old one is released).
func TestKitFilesAreRendered(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "..")
	wanted := map[string]bool{}
	for _, f := range scaffold.KitFiles {
		want, err := f.Render()
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(root, f.Path))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s is not what the kit renders: run go run ./internal/cmd/genkit", f.Path)
		wanted[filepath.Clean(f.Path)] = true
	}
	for _, dir := range []string{"processes/comms", "processes/files"} {
		stale, err := Stale(root, dir, wanted)
		require.NoError(t, err)
		require.Empty(t, stale, "generated files the kit no longer renders: run go run ./internal/cmd/genkit")
	}
}

// genkit writes missing files and leaves identical ones alone; it rewrites a function or view
// file that differs, deletes a generated one the kit no longer renders and updates
// definitions.sum; it refuses to change a migration that exists (an applied migration must not
// change) unless forced.
func TestGenkitRewritesDefinitionsAndKeepsMigrations(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	require.NoError(t, run(root, false))
	for _, f := range scaffold.KitFiles {
		require.FileExists(t, filepath.Join(root, f.Path))
	}
	sums := filepath.Join(root, "processes", "comms", "definitions.sum")
	require.FileExists(t, sums)
	require.NoError(t, run(root, false), "a second run changes nothing")

	var def, mig scaffold.KitFile
	for _, f := range scaffold.KitFiles {
		if f.Migration {
			mig = f
		} else if strings.HasPrefix(f.Path, "processes/comms/") {
			def = f
		}
	}
	// A function file edited by hand is rendered again, and its version bumped.
	before, err := os.ReadFile(sums)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, def.Path), []byte("-- edited\n"), 0o644))
	require.NoError(t, run(root, false))
	want, err := def.Render()
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(root, def.Path))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	after, err := os.ReadFile(sums)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "the same text again: the same version")

	// A generated file the kit does not render is deleted; a hand-written one is kept.
	gone := filepath.Join(root, "processes", "comms", "functions", "comms", "old_helper.sql")
	require.NoError(t, os.WriteFile(gone, append([]byte(generatedMark+" from the kit\n"), want...), 0o644))
	mine := filepath.Join(root, "processes", "comms", "functions", "comms", "mine.sql")
	require.NoError(t, os.WriteFile(mine, []byte("-- hand-written\n"), 0o644))
	require.NoError(t, run(root, false))
	require.NoFileExists(t, gone)
	require.FileExists(t, mine)

	// A migration is never changed without -force.
	path := filepath.Join(root, mig.Path)
	require.NoError(t, os.WriteFile(path, []byte("-- applied long ago\n"), 0o644))
	err = run(root, false)
	require.ErrorContains(t, err, "a migration that may be applied must not change; write the change as a new migration")
	got, rerr := os.ReadFile(path)
	require.NoError(t, rerr)
	require.Equal(t, "-- applied long ago\n", string(got), "nothing written")
	require.NoError(t, run(root, true))
	want, err = mig.Render()
	require.NoError(t, err)
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}
