package bench_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/bench"
)

func TestPressure(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	for _, bad := range []struct {
		cfg  bench.PressureConfig
		want string
	}{
		{bench.PressureConfig{Rate: -1}, "--rate must be between"},
		{bench.PressureConfig{Phase: 10 * time.Millisecond}, "--phase must be between 100ms and 24h"},
		{bench.PressureConfig{Readers: 65}, "--readers must be between 1 and 64"},
		{bench.PressureConfig{ReaderPause: -time.Second}, "--reader-pause must be between 0 and 1h"},
		{bench.PressureConfig{Sample: time.Millisecond}, "--sample must be at least 100ms"},
		{bench.PressureConfig{Phases: []string{"clean", "dirty"}}, `unknown phase "dirty"`},
		{bench.PressureConfig{Phases: []string{"readers", "clean"}}, `"clean" repeated or out of order`},
		{bench.PressureConfig{Phases: []string{"clean", "clean"}}, `"clean" repeated or out of order`},
	} {
		_, err := bench.Pressure(t.Context(), e, bad.cfg)
		require.ErrorContains(t, err, bad.want)
	}

	r, err := bench.Pressure(t.Context(), e, bench.PressureConfig{Rate: 200, Phase: time.Second, Warmup: 200 * time.Millisecond,
		WorkerOptions: bench.WorkerOptions{Concurrency: 20}})
	require.NoError(t, err)
	require.Equal(t, 4, r.Readers, "the default")
	var names []string
	for _, p := range r.Phases {
		names = append(names, p.Name)
		require.InDelta(t, 1.0, p.Seconds, 0.5, p.Name)
		require.Positive(t, p.Enqueued, p.Name)
		require.Positive(t, p.Completed, p.Name)
		require.Positive(t, p.Claims, p.Name)
		require.LessOrEqual(t, p.Claim.P50, p.Claim.P99, p.Name)
		require.GreaterOrEqual(t, p.Depth, int64(0))
		tables := map[string]bench.TableStat{}
		for _, ts := range p.Tables {
			tables[ts.Table] = ts
		}
		for _, want := range []string{"task", "task_lease", "task_event"} {
			require.Contains(t, tables, want, p.Name)
		}
		for name := range tables { // one row per logical table: partitions are summed into theirs
			require.NotRegexp(t, `_(p[0-9]{8}|default)$`, name, p.Name)
		}
	}
	require.Equal(t, []string{"clean", "open_xid", "readers", "recovery"}, names)
	require.Equal(t, 1.0, r.Phases[0].RatioToClean)
	require.NotNil(t, r.Drained)

	// The open-xid phase held a real xid: pg_stat_activity showed it on the holder's backend.
	require.Positive(t, r.HolderXID)
	require.Equal(t, r.HolderXID%(1<<32), r.Phases[1].HolderBackendXID)
	require.Zero(t, r.Phases[0].HolderBackendXID)
	// Each reader held its snapshot to the phase's end, and scanned.
	require.Equal(t, 4, r.Phases[2].ReaderSnapshots)
	require.Positive(t, r.Phases[2].ReaderScans)
	require.Equal(t, r.Phases[3].Depth <= r.Phases[0].Depth+20, *r.Drained)

	// By the last phase the statistics show the live tasks the run left.
	last := r.Phases[3]
	var live int64
	for _, ts := range last.Tables {
		if ts.Table == "task" {
			live = ts.Live + ts.Dead
		}
	}
	require.Positive(t, live)

	// Paced readers: with an hour's pause each scans once in its phase, and still holds its
	// snapshot to the end.
	paced, err := bench.Pressure(t.Context(), e, bench.PressureConfig{Rate: 200, Phase: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		WorkerOptions: bench.WorkerOptions{Concurrency: 20}, ReaderPause: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 4, paced.Phases[2].ReaderSnapshots)
	require.EqualValues(t, 4, paced.Phases[2].ReaderScans, "one scan per reader, then the pause")
	require.InDelta(t, 3600000, paced.ReaderPauseMS, 0.001)

	m := asJSON(t, r)
	require.Equal(t, "pressure", m["mode"])
	phases, ok := m["phases"].([]any)
	require.True(t, ok)
	require.Len(t, phases, 4)
	p1, ok := phases[1].(map[string]any)
	require.True(t, ok)
	require.Contains(t, p1, "claim_ms")
	require.Contains(t, p1, "holder_backend_xid")
	require.Contains(t, p1["tables"].([]any)[0], "n_dead_tup")
}

// A sustained-load run: one clean phase measured in windows, the last compared with the first.
func TestPressureSustainedSamples(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Pressure(t.Context(), e, bench.PressureConfig{Rate: 200, Phases: []string{"clean"}, Phase: 1500 * time.Millisecond,
		Sample: 500 * time.Millisecond, Warmup: 100 * time.Millisecond, WorkerOptions: bench.WorkerOptions{Concurrency: 20}})
	require.NoError(t, err)
	require.Len(t, r.Phases, 1)
	require.Nil(t, r.Drained, "no recovery phase to compare")
	p := r.Phases[0]
	require.Equal(t, "clean", p.Name)
	// Three windows of 500 ms in a phase of 1.5 s, or two when a starved machine ticks late: the
	// last is compared with the first either way.
	require.GreaterOrEqual(t, len(p.Samples), 2)
	var completed int64
	last := 0.0
	for _, w := range p.Samples {
		require.Greater(t, w.AtSeconds, last, "in order")
		last = w.AtSeconds
		require.Positive(t, w.Seconds)
		require.GreaterOrEqual(t, w.TaskDeadMax, w.TaskDead)
		require.GreaterOrEqual(t, w.Depth, int64(0))
		require.LessOrEqual(t, w.Claim.P50, w.Claim.P99)
		completed += w.Completed
	}
	require.Equal(t, p.Completed, completed, "the windows add up to the phase")
	require.NotNil(t, p.LastToFirst)
	require.Positive(t, p.LastToFirst.CompletionsPerSecond)
	require.Equal(t, 500.0, r.SampleSeconds*1000)

	m := asJSON(t, r)
	phases, ok := m["phases"].([]any)
	require.True(t, ok)
	p0, ok := phases[0].(map[string]any)
	require.True(t, ok)
	require.Contains(t, p0, "samples")
	require.Contains(t, p0, "last_to_first")
	require.NotContains(t, m, "drained")
}
