package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestParseFlagsDefaultsAreRiverBenchs(t *testing.T) {
	t.Parallel()
	c, err := parseFlags([]string{"--database-url", "postgres://x/y"}, noEnv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 100_000, c.Jobs)
	require.Equal(t, 2000, c.MaxWorkers)
	require.Equal(t, "many", c.Insert)
	require.Equal(t, "throughput", c.Mode)
	require.Equal(t, 32, c.Connections)
	// app-tx runs River with its own default FetchCooldown, unless one is given.
	require.Equal(t, 100*time.Millisecond, c.AppFetchCooldown)
	c, err = parseFlags([]string{"--database-url", "postgres://x/y", "--fetch-cooldown", "5ms"}, noEnv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 5*time.Millisecond, c.AppFetchCooldown)
}

func TestParseFlagsRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--jobs", "0"}, "--jobs must be positive"},
		{[]string{"--max-workers", "10001"}, "--max-workers must be between 1 and 10000"},
		{[]string{"--max-workers", "0"}, "--max-workers must be between 1 and 10000"},
		{[]string{"--fetch-cooldown", "0s"}, "at least 1ms"},
		{[]string{"--insert", "copy"}, `--insert "copy": want many or fast`},
		{[]string{"--max-conns", "-1"}, "--max-conns must not be negative"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--jobs", "many"}, "invalid value"},
		{[]string{"--mode", "latency"}, `--mode "latency": want throughput or app-tx`},
		{[]string{"--connections", "0"}, "--connections must be at least 1"},
		{[]string{"--rounds", "0"}, "--rounds must be at least 1"},
		{[]string{"--duration", "0s"}, "--duration must be positive"},
	} {
		_, err := parseFlags(append([]string{"--database-url", "postgres://x/y"}, tc.args...), noEnv, io.Discard)
		require.ErrorContains(t, err, tc.want, tc.args)
	}
	_, err := parseFlags(nil, noEnv, io.Discard)
	require.ErrorContains(t, err, "no database")
	c, err := parseFlags(nil, func(string) string { return "postgres://from/env" }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "postgres://from/env", c.DatabaseURL)
}

// TestRun works a few jobs on the server in TASKORCH_TEST_DATABASE_URL (make test's withpg
// gives one) and checks the figures and that the database is gone afterwards.
func TestRun(t *testing.T) {
	t.Parallel()
	url := os.Getenv("TASKORCH_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("TASKORCH_TEST_DATABASE_URL is not set: run under go run ./internal/cmd/withpg from the repository's root")
	}
	v, err := run(t.Context(), config{DatabaseURL: url, Jobs: 3000, MaxWorkers: 100, Insert: "many",
		FetchCooldown: 2 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond}, io.Discard)
	require.NoError(t, err)
	r, ok := v.(*result)
	require.True(t, ok, "%T", v)
	require.EqualValues(t, 3000, r.Tasks)
	require.Positive(t, r.TasksPerSecond)
	require.Positive(t, r.Seconds)
	require.Equal(t, "v0.51.2", r.RiverVersion, "the version go.mod pins")
	require.Positive(t, r.CPU.Client)

	// The keys taskorch bench throughput --json shares.
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"mode", "tasks", "workers", "concurrency", "enqueue_seconds", "seconds", "tasks_per_second", "cpu_per_task", "load_average_before"} {
		require.Contains(t, m, k)
	}

	c, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(t.Context())) })
	var n int
	require.NoError(t, c.QueryRow(t.Context(), `select count(*) from pg_database where datname = $1`, r.Database).Scan(&n))
	require.Zero(t, n, "the benchmark's database is dropped")
}

func noEnv(string) string { return "" }

// TestRunAppTx runs the app-tx mode briefly: both sides measured, every committed insert is a
// job, and the keys scripts/bench-peers.sh reads are there.
func TestRunAppTx(t *testing.T) {
	t.Parallel()
	url := os.Getenv("TASKORCH_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("TASKORCH_TEST_DATABASE_URL is not set: run under go run ./internal/cmd/withpg from the repository's root")
	}
	v, err := run(t.Context(), config{DatabaseURL: url, Mode: "app-tx", Connections: 4, Duration: 300 * time.Millisecond,
		Warmup: 100 * time.Millisecond, Rounds: 2, Concurrency: 10, AppFetchCooldown: 100 * time.Millisecond}, io.Discard)
	require.NoError(t, err)
	r, ok := v.(*appTxResult)
	require.True(t, ok, "%T", v)
	require.Len(t, r.Order.Runs, 2)
	require.Len(t, r.Enqueue.Runs, 2)
	require.Positive(t, r.OrderTxPerSecond)
	require.Positive(t, r.EnqueueTxPerSecond)
	require.Positive(t, r.Tasks)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"mode", "order_tx_per_second", "enqueue_tx_per_second", "ratio", "order_only", "enqueue"} {
		require.Contains(t, m, k)
	}
	require.Equal(t, "app-tx", m["mode"])
}
