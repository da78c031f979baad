package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Config{}.withDefaults()
	require.NoError(t, err)
	require.NotEmpty(t, cfg.Hostname)
	require.NotZero(t, cfg.PID)
	require.Contains(t, cfg.WorkerID, cfg.Hostname)
	require.Equal(t, 5*time.Second, cfg.HeartbeatInterval)
	require.Equal(t, 30*time.Second, cfg.WorkerTimeout)
	require.Equal(t, 15*time.Second, cfg.LeaderTTL)
	require.Equal(t, 7*24*time.Hour, cfg.Retention)
	require.Equal(t, 30*24*time.Hour, cfg.FailedRetention)
	require.Equal(t, 30*24*time.Hour, cfg.HistoryRetention, "the larger of Retention and FailedRetention")
	require.Equal(t, time.Minute, cfg.PruneInterval)
	require.Equal(t, time.Second, cfg.ScheduleInterval)
	require.NotNil(t, cfg.Logger)
	require.NotNil(t, cfg.Now)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg Config
		msg string
	}{
		{Config{HeartbeatInterval: time.Second, WorkerTimeout: time.Second}, "at least twice HeartbeatInterval"},
		{Config{LeaderTTL: -time.Second}, "LeaderTTL must be positive"},
		{Config{Retention: -2 * time.Hour}, "Retention must be positive or KeepForever"},
		{Config{HistoryRetention: -time.Minute}, "HistoryRetention must be positive or KeepForever"},
		{Config{PoolSize: -1}, "PoolSize must not be negative"},
	} {
		_, err := New(nil, tc.cfg)
		require.Error(t, err)
		_, err = tc.cfg.withDefaults()
		require.ErrorContains(t, err, tc.msg)
	}
	_, err := Config{Retention: KeepForever, FailedRetention: KeepForever}.withDefaults()
	require.NoError(t, err)
}

// HistoryRetention defaults to the longer of the tasks' retentions, so a kept task keeps its
// history; set, it is used as given.
func TestConfigHistoryRetentionDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{Retention: 40 * 24 * time.Hour}, 40 * 24 * time.Hour},
		{Config{Retention: time.Hour, FailedRetention: 2 * time.Hour}, 2 * time.Hour},
		{Config{Retention: KeepForever}, KeepForever},
		{Config{FailedRetention: KeepForever}, KeepForever},
		{Config{Retention: KeepForever, HistoryRetention: 3 * time.Hour}, 3 * time.Hour},
		{Config{HistoryRetention: KeepForever}, KeepForever},
	} {
		cfg, err := tc.cfg.withDefaults()
		require.NoError(t, err)
		require.Equal(t, tc.want, cfg.HistoryRetention, "%+v", tc.cfg)
	}
}
