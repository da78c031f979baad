package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// An amended migration carries the checksum databases recorded for its first text, so neither
// Up nor a status sees the amendment; any later change of the file fails to load.
func TestAmendedMigrationKeepsItsRecordedChecksum(t *testing.T) {
	t.Parallel()
	first, now := "select 1;", "select 1; -- amended"
	fsys := fstest.MapFS{"0001_a.sql": {Data: []byte(now)}}
	spec := SetSpec{Name: "s", Amended: map[int]Amendment{1: {File: sum256(now), Recorded: sum256(first)}}}
	s, err := Load(fsys, spec)
	require.NoError(t, err)
	require.Equal(t, sum256(first), s.Migrations[0].Checksum)
	require.Equal(t, now, s.Migrations[0].Body, "the amended text is what runs")

	fsys["0001_a.sql"] = &fstest.MapFile{Data: []byte("select 2;")}
	_, err = Load(fsys, spec)
	require.ErrorContains(t, err, "s/0001_a was amended")

	noAmendment, err := Load(fstest.MapFS{"0001_a.sql": {Data: []byte(now)}}, SetSpec{Name: "s"})
	require.NoError(t, err)
	require.Equal(t, sum256(now), noAmendment.Migrations[0].Checksum)
}

func sum256(s string) string {
	b := sha256.Sum256([]byte(s))
	return hex.EncodeToString(b[:])
}
