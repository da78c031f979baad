package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// JSON log lines give durations as seconds (a number), at the top level, in groups and through
// slog.Any; the text format keeps Go's 1.5s.
func TestJSONLogDurationsInSeconds(t *testing.T) {
	t.Parallel()
	logLine := func(format string) []byte {
		f, err := os.Create(filepath.Join(t.TempDir(), "log"))
		require.NoError(t, err)
		defer f.Close()
		log, err := newLogger(f, format, "info")
		require.NoError(t, err)
		log.Info("stopping", "grace", 30*time.Second, slog.Group("retry", "in", 1500*time.Millisecond),
			slog.Any("wait", 250*time.Millisecond), "attempt", 3, "name", "x")
		b, err := os.ReadFile(f.Name())
		require.NoError(t, err)
		return b
	}
	var rec map[string]any
	require.NoError(t, json.Unmarshal(logLine("json"), &rec))
	require.Equal(t, 30.0, rec["grace"])
	require.Equal(t, map[string]any{"in": 1.5}, rec["retry"])
	require.Equal(t, 0.25, rec["wait"])
	require.Equal(t, 3.0, rec["attempt"], "other numbers stay as they are")
	require.Equal(t, "x", rec["name"])

	text := logLine("text")
	require.True(t, bytes.Contains(text, []byte("grace=30s retry.in=1.5s wait=250ms")), "%s", text)
}
