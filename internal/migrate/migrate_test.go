package migrate

import (
	"bytes"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/migrations"
)

func TestLoadOrdersAndChecksums(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"s/0002_second.sql": {Data: []byte("select 2;")},
		"s/0001_first.sql":  {Data: []byte("select 1;")},
	}
	ms, err := Load(fsys, "s")
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, "s/0001_first", ms[0].ID())
	require.Equal(t, "s/0002_second", ms[1].ID())
	require.Len(t, ms[0].Checksum, 64)
	require.NotEqual(t, Fingerprint(ms), Fingerprint(ms[:1]))
}

func TestLoadRejectsBadSets(t *testing.T) {
	t.Parallel()
	for name, fsys := range map[string]fstest.MapFS{
		"is not named NNNN_name.sql": {"s/1_x.sql": {Data: []byte("")}},
		"two files numbered 0001":    {"s/0001_a.sql": {}, "s/0001_b.sql": {}},
		"has no migrations":          {"s/subdir/x": {}},
	} {
		_, err := Load(fsys, "s")
		require.ErrorContains(t, err, name)
	}
	_, err := Load(fstest.MapFS{}, "missing")
	require.ErrorContains(t, err, `migration set "missing"`)
}

// The shipped core set loads, and its psql script wraps each file with the bookkeeping.
func TestShippedCoreSetAndScript(t *testing.T) {
	t.Parallel()
	ms, err := Load(migrations.FS, "core")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ms), 2)
	var buf bytes.Buffer
	require.NoError(t, WriteSQL(&buf, ms))
	script := buf.String()
	for _, m := range ms {
		require.Contains(t, script, "===== "+m.ID()+" =====")
		require.Contains(t, script, m.Checksum)
	}
	require.Equal(t, len(ms), strings.Count(script, "\\if :taskorch_apply"))
	require.Equal(t, len(ms), strings.Count(script, "\\endif"))
}
