package prometheus_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	taskorchprom "github.com/taskorch/taskorch/contrib/prometheus"
	"github.com/taskorch/taskorch/tasktype"
)

// The leader's schedule ticks are counted, the late ones (caught up after a handover) and the
// skipped ones (older than the catch-up window) apart in taskorch_schedule_ticks_missed_total,
// whose two series exist from the start so that increase() sees the first.
func TestScheduleTicksMissed(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs := taskorchprom.New(reg)
	require.NoError(t, obs.Attach(tasktype.WorkerInfo{}))
	got := gather(t, reg)
	require.Contains(t, got, `taskorch_schedule_ticks_missed_total{reason="late"}`)
	require.Contains(t, got, `taskorch_schedule_ticks_missed_total{reason="skipped"}`)

	obs.WorkerEvent(tasktype.WorkerEvent{Kind: tasktype.EventScheduled})
	obs.WorkerEvent(tasktype.WorkerEvent{Kind: tasktype.EventScheduled, Late: true})
	obs.WorkerEvent(tasktype.WorkerEvent{Kind: tasktype.EventScheduled, Late: true})
	obs.WorkerEvent(tasktype.WorkerEvent{Kind: tasktype.EventTicksMissed, N: 5})
	got = gather(t, reg)
	require.Equal(t, 3.0, got["taskorch_schedule_ticks_total"], "every tick enqueued, late or not")
	require.Equal(t, 2.0, got[`taskorch_schedule_ticks_missed_total{reason="late"}`])
	require.Equal(t, 5.0, got[`taskorch_schedule_ticks_missed_total{reason="skipped"}`])
}
