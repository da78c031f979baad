package migrations_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/schemadump"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/migrations"
	"github.com/taskorch/taskorch/processes"
)

func TestMain(m *testing.M) { dbtest.Main(m, dbtest.SetsOptions(migrations.Sets...)) }

// schema.sql, at the repository's root, is the live schema after every migration of every set:
// regenerated here on a freshly migrated database, it must be the checked-in file, byte for byte.
func TestSchemaSQLUpToDate(t *testing.T) {
	t.Parallel()
	if _, err := schemadump.PgDump(); err != nil {
		t.Skipf("cannot regenerate %s: %v", schemadump.FileName, err)
	}
	want, err := os.ReadFile(filepath.Join("..", schemadump.FileName))
	require.NoError(t, err, "%s is missing: run make schema", schemadump.FileName)
	got, err := schemadump.Dump(t.Context(), dbtest.NewDBURL(t))
	require.NoError(t, err)

	if gv, wv := schemadump.Versions(got), schemadump.Versions(want); gv != wv {
		t.Skipf("%s was made with other PostgreSQL versions (%q) than this machine's (%q), which print some definitions differently: cannot compare", schemadump.FileName, wv, gv)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("schema.sql is stale: run make schema (and commit it)\n%s", firstDifference(string(want), string(got)))
	}
}

// Every set folder (core here, the process sets under processes/) is in Sets, so that
// schema.sql and the tests cover it.
func TestSetsListsEverySet(t *testing.T) {
	t.Parallel()
	var dirs []string
	for _, fsys := range []fs.ReadDirFS{migrations.FS, processes.FS} {
		entries, err := fsys.ReadDir(".")
		require.NoError(t, err)
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, e.Name())
			}
		}
	}
	slices.Sort(dirs)
	sets := slices.Clone(migrations.Sets)
	slices.Sort(sets)
	require.Equal(t, dirs, sets, "migrations.Sets must list every set folder (in an order they apply in)")
	require.Equal(t, "core", migrations.Sets[0])
	for _, s := range migrations.Sets {
		fsys, err := migrations.SetFS(s)
		require.NoError(t, err)
		_, err = fs.Stat(fsys, "definitions.sum")
		require.NoError(t, err, "%s: the set's folder", migrations.Dir(s))
	}
}

// firstDifference shows the first line where the checked-in dump and the regenerated one
// differ, with a few lines around it.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d (checked in: %d lines, regenerated: %d lines):\n", i+1, len(w), len(g))
	show := func(label string, lines []string) {
		for j := max(0, i-3); j < min(len(lines), i+4); j++ {
			mark := " "
			if j == i {
				mark = ">"
			}
			fmt.Fprintf(&b, "%s %s %5d | %s\n", label, mark, j+1, lines[j])
		}
	}
	show("checked in ", w)
	show("regenerated", g)
	return b.String()
}
