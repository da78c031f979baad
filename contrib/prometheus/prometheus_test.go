package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	taskorchprom "github.com/taskorch/taskorch/contrib/prometheus"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// After a known workload the worker's counters hold exactly what happened (the example alert
// rules are tested on a real worker's /metrics by cmd/taskorch's TestE2EAlertRules). A type no worker claims is not claimed, and the leader's
// taskorch_queue_unserved says so.
func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	noRetryDelay(t, pool)
	reg := prometheus.NewRegistry()

	var snoozed atomic.Bool
	stubbornStarted := make(chan int64, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("ok", func(context.Context, *taskorch.Task) error { return nil })
	hs.HandleFunc("flaky", func(context.Context, *taskorch.Task) error { return errors.New("always fails") })
	hs.HandleFunc("snoozes", func(context.Context, *taskorch.Task) error {
		if snoozed.CompareAndSwap(false, true) {
			return taskorch.Snooze(time.Millisecond)
		}
		return nil
	})
	// Ignores its lost lease and reports success: the completion is refused.
	hs.HandleFunc("stubborn", func(ctx context.Context, task *taskorch.Task) error {
		stubbornStarted <- task.ID
		<-ctx.Done()
		return nil
	})
	_, stop := startWorker(t, pool, &taskorch.WorkerConfig{
		Handlers: hs, Observers: []taskorch.Observer{taskorchprom.New(reg)}, LeaseDuration: time.Second, QueueStatsInterval: 20 * time.Millisecond,
	})

	enq := func(typ string, maxAttempts int, at time.Time) int64 {
		res, err := c.Enqueue(ctx, raw(typ, `{}`), &taskorch.EnqueueOpts{MaxAttempts: maxAttempts, ScheduledAt: at})
		require.NoError(t, err)
		return res.TaskID
	}
	var oks []int64
	for range 5 {
		oks = append(oks, enq("ok", 0, time.Time{}))
	}
	flaky := enq("flaky", 3, time.Time{})
	unknown := enq("nobody_handles_this", 5, time.Time{})
	snoozes := enq("snoozes", 1, time.Time{})
	enq("later", 0, time.Now().Add(time.Hour))
	stubborn := enq("stubborn", 1, time.Time{})

	for _, id := range append(oks, snoozes) {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	waitStatus(t, pool, flaky, taskorch.StatusDead)
	require.Equal(t, stubborn, <-stubbornStarted)
	_, err := c.Cancel(ctx, stubborn)
	require.NoError(t, err)

	want := map[string]float64{
		`taskorch_tasks_claimed_total{task_type="ok"}`:                           5,
		`taskorch_tasks_claimed_total{task_type="flaky"}`:                        3,
		`taskorch_tasks_claimed_total{task_type="snoozes"}`:                      2,
		`taskorch_tasks_claimed_total{task_type="stubborn"}`:                     1,
		`taskorch_tasks_completed_total{task_type="ok"}`:                         5,
		`taskorch_tasks_completed_total{task_type="snoozes"}`:                    1,
		`taskorch_tasks_failed_total{outcome="retry",task_type="flaky"}`:         2,
		`taskorch_tasks_failed_total{outcome="dead",task_type="flaky"}`:          1,
		`taskorch_tasks_snoozed_total{task_type="snoozes"}`:                      1,
		`taskorch_task_duration_seconds_count{task_type="ok"}`:                   5,
		`taskorch_task_duration_seconds_count{task_type="flaky"}`:                3,
		`taskorch_task_start_delay_seconds_count{task_type="ok"}`:                5,
		`taskorch_task_start_delay_seconds_count{task_type="snoozes"}`:           2,
		`taskorch_leases_lost_total`:                                             1,
		`taskorch_completions_refused_total`:                                     1,
		`taskorch_leader`:                                                        1,
		`taskorch_queue_depth{status="pending",task_type="later"}`:               1,
		`taskorch_oldest_pending_age_seconds{task_type="later"}`:                 0, // not due yet
		`taskorch_queue_unserved{task_type="later"}`:                             0, // nothing due
		`taskorch_queue_depth{status="pending",task_type="nobody_handles_this"}`: 1,
		`taskorch_queue_unserved{task_type="nobody_handles_this"}`:               1, // due, and no worker claims it
	}
	var got map[string]float64
	require.Eventually(t, func() bool {
		got = gather(t, reg)
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				return false
			}
		}
		// The leader samples the queues every QueueStatsInterval: a sample taken before the
		// last tasks ended still shows them running. Only the undue task and the unserved one
		// stay pending.
		return countPrefix(got, "taskorch_queue_depth{") == 2
	}, 20*time.Second, 10*time.Millisecond, "metrics never matched")
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
	// Nothing counted beyond the workload: the other per-type series of the handled types (and
	// the dead series of the types the leader sampled) are there at 0, so that increase() sees
	// their first event.
	handled := []string{"ok", "flaky", "snoozes", "stubborn", "db_function"}
	for _, typ := range handled {
		for _, s := range []string{
			`taskorch_tasks_claimed_total{task_type="` + typ + `"}`,
			`taskorch_tasks_completed_total{task_type="` + typ + `"}`,
			`taskorch_tasks_snoozed_total{task_type="` + typ + `"}`,
			`taskorch_tasks_failed_total{outcome="retry",task_type="` + typ + `"}`,
			`taskorch_tasks_failed_total{outcome="failed",task_type="` + typ + `"}`,
			`taskorch_tasks_failed_total{outcome="dead",task_type="` + typ + `"}`,
		} {
			require.Contains(t, got, s, "a handled type's series exists from the start")
		}
	}
	for k, v := range got {
		if strings.HasPrefix(k, "taskorch_tasks_") && !strings.HasPrefix(k, "taskorch_tasks_recovered") && !strings.HasPrefix(k, "taskorch_tasks_pruned") {
			if _, ok := want[k]; !ok {
				require.Zero(t, v, "unexpected count: %s", k)
			}
		}
	}
	require.NotContains(t, got, `taskorch_provider_refusals_total{task_type="ok"}`, "only channels have refusals")
	require.Equal(t, 2, countPrefix(got, "taskorch_queue_depth{"), "only the undue task and the unserved one are pending: %v", got)
	require.Positive(t, got[`taskorch_oldest_pending_age_seconds{task_type="nobody_handles_this"}`])
	require.Equal(t, 0, scalar[int](t, pool, `select attempt from queues.task where task_id = $1 and status = 'pending'`, unknown),
		"the task no worker claims stays pending, its attempts unspent")
	require.Positive(t, got["taskorch_db_pool_max_conns"])
	require.Positive(t, got["taskorch_db_pool_acquires_total"])
	require.Equal(t, float64(0), got[`taskorch_maintenance_errors_total{op="reap"}`], "known ops start at 0")

	// A stopped worker resigns: it is no longer the leader and reports no queue gauges.
	stop()
	got = gather(t, reg)
	require.Equal(t, float64(0), got["taskorch_leader"])
	require.Zero(t, countPrefix(got, "taskorch_queue_depth{"))
	require.Zero(t, countPrefix(got, "taskorch_queue_unserved{"))
}

// Without the observer there are no metrics; two workers cannot share one registry unwrapped.
func TestWorkerMetricsRegistration(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := taskorch.NewWorker(pool, nil)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	_, err = taskorch.NewWorker(pool, &taskorch.WorkerConfig{Observers: []taskorch.Observer{taskorchprom.New(reg)}})
	require.NoError(t, err)
	_, err = taskorch.NewWorker(pool, &taskorch.WorkerConfig{Observers: []taskorch.Observer{taskorchprom.New(reg)}})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	require.ErrorContains(t, err, "give each worker its own registry")
	shared := prometheus.NewRegistry()
	for _, name := range []string{"a", "b"} {
		_, err = taskorch.NewWorker(pool, &taskorch.WorkerConfig{
			Observers: []taskorch.Observer{taskorchprom.New(prometheus.WrapRegistererWith(prometheus.Labels{"worker": name}, shared))}})
		require.NoError(t, err)
	}
}

// queues.queue_stats() counts pending and running tasks by type, the oldest due task's wait, the
// due tasks, and the registered workers that claim the type (task_types NULL: every type); the
// worker role may call it.
func TestQueueStats(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	mustExec(t, tx, `select queues.enqueue('a', '{}', now() - interval '1 hour')`)
	mustExec(t, tx, `select queues.enqueue('a', '{}', now() - interval '1 minute')`)
	mustExec(t, tx, `select queues.enqueue('a', '{}', now() + interval '1 hour')`)
	mustExec(t, tx, `select queues.enqueue('b', '{}')`)
	mustExec(t, tx, `update queues.task set status = 'completed', completed_at = now() where task_type = 'b'`)
	mustExec(t, tx, `select queues.enqueue('c', '{}', now() - interval '2 minutes')`)
	mustExec(t, tx, `select queues.enqueue('d', '{}', now() + interval '1 hour')`)
	mustExec(t, tx, `select queues.register_worker('w1', 'host', _task_types => '{a,db_function}')`)
	mustExec(t, tx, `select queues.register_worker('w2', 'host', _task_types => '{a,b}')`)
	mustExec(t, tx, `set local role worker_service_user`)
	stats := func() []string {
		rows, err := tx.Query(context.Background(),
			`select task_type, status, tasks, round(oldest_pending_age_seconds), due, workers from queues.queue_stats() order by 1, 2`)
		require.NoError(t, err)
		var got []string
		for rows.Next() {
			var typ, status string
			var n, due, workers int64
			var age float64
			require.NoError(t, rows.Scan(&typ, &status, &n, &age, &due, &workers))
			got = append(got, fmt.Sprintf("%s %s %d %.0f due=%d workers=%d", typ, status, n, age, due, workers))
		}
		require.NoError(t, rows.Err())
		return got
	}
	require.Equal(t, []string{"a pending 3 3600 due=2 workers=2", "c pending 1 120 due=1 workers=0", "d pending 1 0 due=0 workers=0"}, stats(),
		"c has due tasks and no worker claims it; d has none due")
	mustExec(t, tx, `select queues.register_worker('w3', 'host')`) // claims every type
	require.Equal(t, []string{"a pending 3 3600 due=2 workers=3", "c pending 1 120 due=1 workers=1", "d pending 1 0 due=0 workers=1"}, stats())
}

// gather returns every sample in reg as `name{label="value",...}` → value, histograms as their
// _count and _sum.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := func(suffix string) string {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				sort.Strings(ls)
				if len(ls) == 0 {
					return mf.GetName() + suffix
				}
				return mf.GetName() + suffix + "{" + strings.Join(ls, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key("_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key("_sum")] = m.GetHistogram().GetSampleSum()
				out[key("_bucket")] = 0 // the name exists
			}
		}
	}
	return out
}

func countPrefix(m map[string]float64, prefix string) int {
	n := 0
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}
