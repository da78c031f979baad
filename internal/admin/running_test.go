package admin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// RunningLongest lists the running tasks claimed first first, with their worker, attempt, claim
// time, lease expiry and how long they have run; nothing else.
func TestRunningLongest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewDB(t)
	recent := seedTask(t, pool, "job", "running", time.Minute)
	oldest := seedTask(t, pool, "job", "running", 2*time.Hour)
	other := seedTask(t, pool, "report", "running", time.Hour)
	seedTask(t, pool, "job", "pending", 0)
	seedTask(t, pool, "job", "dead", 3*time.Hour)

	ts, err := RunningLongest(ctx, pool, 10, nil)
	require.NoError(t, err)
	require.Len(t, ts, 3)
	require.Equal(t, []int64{oldest, other, recent}, []int64{ts[0].ID, ts[1].ID, ts[2].ID})
	require.Equal(t, "seed-worker", *ts[0].WorkerID)
	require.Equal(t, 1, ts[0].Attempt)
	require.NotNil(t, ts[0].LeaseExpiresAt)
	require.InDelta(t, (2 * time.Hour).Seconds(), ts[0].RunningSeconds, 60)

	ts, err = RunningLongest(ctx, pool, 1, []string{"job"})
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, oldest, ts[0].ID)

	_, err = RunningLongest(ctx, pool, 0, nil)
	require.ErrorIs(t, err, ErrInvalidInput)
}
