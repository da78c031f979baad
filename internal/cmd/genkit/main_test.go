package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/scaffold"
)

// The checked-in migrations are exactly what the kit renders: change the kit, run genkit, and
// commit both (as a new migration once the old one is released).
func TestKitMigrationsAreRendered(t *testing.T) {
	t.Parallel()
	for _, f := range scaffold.KitFiles {
		want, err := f.Render()
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("..", "..", "..", f.Path))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s is not what the kit renders: run go run ./internal/cmd/genkit", f.Path)
	}
}

// genkit writes missing files, leaves identical ones alone, and refuses to change one that
// exists (an applied migration must not change) unless forced.
func TestGenkitRefusesToChangeAMigration(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	require.NoError(t, run(root, false))
	for _, f := range scaffold.KitFiles {
		require.FileExists(t, filepath.Join(root, f.Path))
	}
	require.NoError(t, run(root, false), "a second run changes nothing")

	path := filepath.Join(root, scaffold.KitFiles[0].Path)
	require.NoError(t, os.WriteFile(path, []byte("-- applied long ago\n"), 0o644))
	err := run(root, false)
	require.ErrorContains(t, err, "a migration that may be applied must not change; write the change as a new migration")
	got, rerr := os.ReadFile(path)
	require.NoError(t, rerr)
	require.Equal(t, "-- applied long ago\n", string(got), "nothing written")

	require.NoError(t, run(root, true))
	want, err := scaffold.KitFiles[0].Render()
	require.NoError(t, err)
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}
