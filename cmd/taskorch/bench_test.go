package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// `taskorch bench` prints one JSON object per run with --json, and a table without.
func TestBenchCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)

	res := runJSON[map[string]any](t, "bench", "throughput", "--tasks", "500", "--concurrency", "20", "--database-url", url)
	require.Equal(t, "throughput", res["mode"])
	require.EqualValues(t, 500, res["tasks"])
	require.Positive(t, res["tasks_per_second"])
	require.Equal(t, true, res["database_created"])

	r := run(t, "bench", "latency", "--rate", "100", "--duration", "500ms", "--warmup", "100ms", "--database-url", url)
	require.Equal(t, 0, r.code, r.err)
	require.Regexp(t, `(?m)^enqueue→start +p50 [0-9.]+ ms, p90 [0-9.]+ ms, p99 [0-9.]+ ms, max [0-9.]+ ms$`, r.out)
	require.Empty(t, r.err, "no progress when stderr is not a terminal")

	sl := runJSON[map[string]any](t, "bench", "slots", "--tasks", "200", "--concurrency", "4", "--work", "1ms", "--database-url", url)
	require.Equal(t, "slots", sl["mode"])
	require.EqualValues(t, 200, sl["tasks"])
	require.EqualValues(t, 4, sl["concurrency"])
	require.EqualValues(t, 1, sl["work_ms"])
	require.Positive(t, sl["utilisation"])

	r = run(t, "bench", "slots", "--work", "-1ms", "--database-url", url)
	require.Equal(t, 1, r.code, r.err)
	require.Contains(t, r.err, "--work must be between 0 and 1m")

	r = run(t, "bench", "pressure", "--phase", "10ms", "--database-url", url)
	require.Equal(t, 1, r.code, r.err)
	require.Contains(t, r.err, "--phase must be between 100ms and 24h")
	r = run(t, "bench", "pressure", "--phases", "clean,recovery,clean", "--database-url", url)
	require.Equal(t, 1, r.code, r.err)
	require.Contains(t, r.err, `--phases: "clean" repeated or out of order`)

	// A window long enough to commit something on a starved machine: beside two busy loops and
	// other packages' tests, 200 ms once counted no order transaction at all.
	at := runJSON[map[string]any](t, "bench", "app-tx", "--connections", "2", "--duration", "1s", "--warmup", "100ms",
		"--rounds", "1", "--database-url", url)
	require.Equal(t, "app-tx", at["mode"])
	require.Positive(t, at["order_tx_per_second"])
	require.Positive(t, at["enqueue_tx_per_second"])
	require.Positive(t, at["ratio"])

	r = run(t, "bench", "throughput")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.err, "no database")

	// Worker options out of range are usage errors, before any connection.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"slots", "--concurrency", "-3"}, "--concurrency must be at least 1, got -3"},
		{[]string{"throughput", "--concurrency", "0"}, "--concurrency must be at least 1, got 0"},
		{[]string{"pressure", "--fetch-batch", "-2"}, "--fetch-batch must be at least 1 (or unset for the worker's default), got -2"},
		{[]string{"latency", "--workers", "0"}, "--workers must be at least 1, got 0"},
		{[]string{"app-tx", "--connections", "0"}, "--connections must be at least 1, got 0"},
		{[]string{"app-tx", "--rounds", "0"}, "--rounds must be at least 1, got 0"},
		{[]string{"workflow", "--rounds", "0"}, "--rounds must be at least 1, got 0"},
		{[]string{"workflow", "--diamonds", "0"}, "--diamonds must be at least 1, got 0"},
		{[]string{"app-tx", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"app-tx", "--workers", "-1"}, "--workers must not be negative, got -1"},
		{[]string{"sleepers", "--sleepers", "0"}, "--sleepers and --rate must be at least 1, --phase positive and --concurrency between 1 and 1000, got 0, 1000, 20s and 100"},
		{[]string{"sleepers", "--phase", "0s"}, "--sleepers and --rate must be at least 1, --phase positive and --concurrency between 1 and 1000, got 100000, 1000, 0s and 100"},
	} {
		r = run(t, append(append([]string{"bench"}, c.args...), "--database-url", "postgres://nobody@127.0.0.1:1/none")...)
		require.Equal(t, exitUsage, r.code, c.args)
		require.Contains(t, r.err, c.want, c.args)
	}
}

// The sleepers mode reads a fresh `taskorch worker` process's RSS in each phase's idle time,
// without and with the workflows asleep.
func TestBenchSleepers(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	res := runJSON[map[string]any](t, "bench", "sleepers", "--sleepers", "200", "--rate", "100", "--phase", "1s", "--idle", "1s",
		"--concurrency", "10", "--worker-bin", taskorchBinary(t), "--database-url", url, "--in-place")
	require.Equal(t, "sleepers", res["mode"])
	phases, ok := res["phases"].([]any)
	require.True(t, ok)
	require.Len(t, phases, 2)
	for _, p := range phases {
		require.Greater(t, p.(map[string]any)["worker_rss_mb"], 5.0)
	}
	require.Positive(t, res["rss_ratio"])
}

// The memory mode measures a separate `taskorch worker` process.
func TestBenchMemory(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	res := runJSON[map[string]any](t, "bench", "memory", "--tasks", "20", "--sample", "300ms",
		"--worker-bin", taskorchBinary(t), "--database-url", url)
	require.Equal(t, "memory", res["mode"])
	require.EqualValues(t, 20, res["tasks"])
	require.Greater(t, res["rss_mb"], 5.0)
	require.GreaterOrEqual(t, res["peak_rss_mb"], res["rss_mb"])
	require.Positive(t, res["idle_rss_mb"])
}
