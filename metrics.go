package taskorch

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskorch/taskorch/internal/maintenance"
)

// The outcomes of a failed attempt, the values of the outcome label of
// taskorch_tasks_failed_total: retried later, failed for good (not retriable), or dead (out of
// attempts).
const (
	outcomeRetry  = "retry"
	outcomeFailed = "failed"
	outcomeDead   = "dead"
)

// metrics is the worker's Prometheus instrumentation (docs/operations.md, "Metrics and alerts").
// A nil *metrics records nothing: every method may be called on nil.
type metrics struct {
	claimed    *prometheus.CounterVec
	completed  *prometheus.CounterVec
	failed     *prometheus.CounterVec
	snoozed    *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	startDelay *prometheus.HistogramVec

	leasesLost    prometheus.Counter
	refused       prometheus.Counter
	notifications prometheus.Counter

	leader      prometheus.Gauge
	reaped      prometheus.Counter
	recovered   prometheus.Counter
	sessionLost prometheus.Counter
	pruned      prometheus.Counter
	scheduled   prometheus.Counter
	missed      *prometheus.CounterVec
	maintErrors *prometheus.CounterVec

	queue *queueCollector
}

func newMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	byType := []string{"task_type"}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "taskorch", Name: name, Help: help}, labels)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "taskorch", Name: name, Help: help})
	}
	m := &metrics{
		claimed:   counterVec("tasks_claimed_total", "Tasks claimed by this worker (one per attempt).", byType...),
		completed: counterVec("tasks_completed_total", "Tasks this worker completed.", byType...),
		failed: counterVec("tasks_failed_total",
			"Failed attempts recorded by this worker, by outcome: retry (retried later), failed (not retriable), dead (out of attempts).",
			"task_type", "outcome"),
		snoozed: counterVec("tasks_snoozed_total", "Tasks a handler snoozed.", byType...),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "taskorch", Name: "task_duration_seconds",
			Help:    "How long one attempt took on this worker, from start to its outcome handed over for recording.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}, byType),
		startDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "taskorch", Name: "task_start_delay_seconds",
			Help:    "How long a task waited between becoming due (its run_at: scheduled time, retry or snooze) and starting on this worker.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}, byType),
		leasesLost:    counter("leases_lost_total", "Running tasks whose lease was found gone (cancelled, or expired and taken over); they were stopped."),
		refused:       counter("completions_refused_total", "Outcomes (completions or failures) the database refused because the lease was stale."),
		notifications: counter("notifications_received_total", "NOTIFY wake-ups received on the LISTEN connection."),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "taskorch", Name: "leader",
			Help: "1 while this worker holds the leader lease, else 0."}),
		reaped:      counter("workers_reaped_total", "Dead workers this worker removed as leader: their session gone for the grace, or silent past the worker timeout."),
		recovered:   counter("tasks_recovered_total", "Running tasks of reaped workers this worker returned to pending as leader."),
		sessionLost: counter("worker_sessions_lost_total", "Times this worker's session connection was lost and opened again (docs/operations.md, \"Crashed workers\")."),
		pruned:      counter("tasks_pruned_total", "Finished tasks this worker deleted as leader (retention)."),
		scheduled:   counter("schedule_ticks_total", "Periodic schedule ticks this worker enqueued (or found enqueued) as leader."),
		missed:      counterVec("schedule_ticks_missed_total", "Schedule ticks this worker as leader enqueued late (reason=late) or skipped as older than the catch-up window (reason=skipped).", "reason"),
		maintErrors: counterVec("maintenance_errors_total", "Failed maintenance operations, retried at their next interval.", "op"),
		queue:       &queueCollector{},
	}
	// Known from the start, so that increase() sees the first error.
	for _, op := range []string{"register", "session", "heartbeat", "leadership", "reap", "session_reap", "prune", "schedule", "resign", "deregister", "queue_stats"} {
		m.maintErrors.WithLabelValues(op)
	}
	m.missed.WithLabelValues("late")
	m.missed.WithLabelValues("skipped")
	for _, c := range []prometheus.Collector{m.claimed, m.completed, m.failed, m.snoozed, m.duration, m.startDelay,
		m.leasesLost, m.refused, m.notifications, m.leader, m.reaped, m.recovered, m.sessionLost, m.pruned, m.scheduled,
		m.missed, m.maintErrors, m.queue, newPoolCollector(pool)} {
		if err := reg.Register(c); err != nil {
			return nil, inputErrorf("registering worker metrics: %v (give each worker its own registry, or wrap each worker's with prometheus.WrapRegistererWith and a distinct label)", err)
		}
	}
	return m, nil
}

// taskStarted counts a claimed task and how long it waited after becoming due.
func (m *metrics) taskStarted(t *Task) {
	if m == nil {
		return
	}
	m.claimed.WithLabelValues(t.Type).Inc()
	m.startDelay.WithLabelValues(t.Type).Observe(max(time.Since(t.RunAt).Seconds(), 0))
}

func (m *metrics) taskFinished(t *Task, d time.Duration) {
	if m == nil {
		return
	}
	m.duration.WithLabelValues(t.Type).Observe(d.Seconds())
}

func (m *metrics) taskCompleted(taskType string) {
	if m == nil {
		return
	}
	m.completed.WithLabelValues(taskType).Inc()
}

// taskFailed counts a recorded failure; status is what fail_task returned.
func (m *metrics) taskFailed(t *Task, status string) {
	if m == nil {
		return
	}
	outcome := outcomeRetry
	switch Status(status) {
	case StatusFailed:
		outcome = outcomeFailed
	case StatusDead:
		outcome = outcomeDead
	}
	m.failed.WithLabelValues(t.Type, outcome).Inc()
}

func (m *metrics) taskSnoozed(t *Task) {
	if m == nil {
		return
	}
	m.snoozed.WithLabelValues(t.Type).Inc()
}

func (m *metrics) leaseLost() {
	if m != nil {
		m.leasesLost.Inc()
	}
}

func (m *metrics) outcomeRefused() {
	if m != nil {
		m.refused.Inc()
	}
}

func (m *metrics) notified() {
	if m != nil {
		m.notifications.Inc()
	}
}

// maintenanceEvent turns the maintainer's events into the leader metrics.
func (m *metrics) maintenanceEvent(e maintenance.Event) {
	if m == nil {
		return
	}
	switch e.Kind {
	case maintenance.EventElected:
		m.leader.Set(1)
	case maintenance.EventDeposed:
		m.leader.Set(0)
		m.queue.set(nil) // the next leader reports the queues
	case maintenance.EventReaped:
		m.reaped.Add(float64(len(e.Workers)))
		m.recovered.Add(float64(e.Tasks))
	case maintenance.EventSessionLost:
		m.sessionLost.Inc()
	case maintenance.EventPruned:
		m.pruned.Add(float64(e.Tasks))
	case maintenance.EventScheduled:
		m.scheduled.Inc()
		if e.Late {
			m.missed.WithLabelValues("late").Inc()
		}
	case maintenance.EventTicksMissed:
		m.missed.WithLabelValues("skipped").Add(float64(e.Missed))
	case maintenance.EventError:
		m.maintErrors.WithLabelValues(e.Op).Inc()
	}
}

// runQueueStats samples queue depth, the oldest pending age and the types no live worker claims
// every QueueStatsInterval while this worker leads: one queues.queue_stats() call, which counts
// only pending and running tasks.
// The other workers report no queue gauges, so the numbers are not repeated per worker.
func (w *Worker) runQueueStats(ctx context.Context) {
	if w.metrics == nil {
		return
	}
	tick := time.NewTicker(w.cfg.QueueStatsInterval)
	defer tick.Stop()
	for {
		if w.maint.IsLeader() {
			w.sampleQueues(ctx)
		} else {
			w.metrics.queue.set(nil)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *Worker) sampleQueues(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, max(w.cfg.QueueStatsInterval, 5*time.Second))
	defer cancel()
	rows, err := w.pool.Query(sctx, `select task_type, status, tasks, oldest_pending_age_seconds, due, workers from queues.queue_stats()`)
	var stats []queueStat
	if err == nil {
		stats, err = pgx.CollectRows(rows, pgx.RowToStructByPos[queueStat])
	}
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("could not sample queue depth; retrying at the next interval", "error", err)
			w.metrics.maintErrors.WithLabelValues("queue_stats").Inc()
		}
		return
	}
	w.metrics.queue.set(stats)
}

type queueStat struct {
	TaskType  string
	Status    string
	Tasks     int64
	OldestAge float64
	Due       int64 // pending tasks whose run_at has come
	Workers   int64 // registered workers that claim the type
}

// queueCollector reports the last queue sample as a whole, so a scrape never sees half of one.
type queueCollector struct {
	mu    sync.Mutex
	stats []queueStat
}

var (
	queueDepthDesc = prometheus.NewDesc("taskorch_queue_depth",
		"Tasks pending or running, by type and status; sampled by the leader only.", []string{"task_type", "status"}, nil)
	oldestPendingDesc = prometheus.NewDesc("taskorch_oldest_pending_age_seconds",
		"How long the longest-waiting due pending task of the type has waited (now minus its run_at, database clock); sampled by the leader only.",
		[]string{"task_type"}, nil)
	unservedDesc = prometheus.NewDesc("taskorch_queue_unserved",
		"1 while the type has due pending tasks and no live worker claims it (none has its handler or provider), else 0; sampled by the leader only.",
		[]string{"task_type"}, nil)
)

func (c *queueCollector) set(stats []queueStat) {
	c.mu.Lock()
	c.stats = stats
	c.mu.Unlock()
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- oldestPendingDesc
	ch <- unservedDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	stats := c.stats
	c.mu.Unlock()
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(s.Tasks), s.TaskType, s.Status)
		if s.Status == string(StatusPending) {
			ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, s.OldestAge, s.TaskType)
			unserved := 0.0
			if s.Due > 0 && s.Workers == 0 {
				unserved = 1
			}
			ch <- prometheus.MustNewConstMetric(unservedDesc, prometheus.GaugeValue, unserved, s.TaskType)
		}
	}
}

// poolCollector reports the worker's pgxpool statistics at scrape time.
type poolCollector struct {
	pool  *pgxpool.Pool
	descs map[string]*prometheus.Desc
}

func newPoolCollector(pool *pgxpool.Pool) *poolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("taskorch_db_pool_"+name, help, nil, nil)
	}
	return &poolCollector{pool: pool, descs: map[string]*prometheus.Desc{
		"acquired":   d("acquired_conns", "Connections currently in use."),
		"idle":       d("idle_conns", "Idle connections in the pool."),
		"total":      d("total_conns", "Connections open (acquired, idle and being made)."),
		"max":        d("max_conns", "The pool's connection limit."),
		"acquires":   d("acquires_total", "Successful connection acquisitions."),
		"empty":      d("empty_acquires_total", "Acquisitions that had to wait because no connection was idle."),
		"wait":       d("acquire_wait_seconds_total", "Time spent waiting for a connection when none was idle."),
		"acquireDur": d("acquire_duration_seconds_total", "Total time of all successful acquisitions."),
	}}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	g := func(k string, v float64) {
		ch <- prometheus.MustNewConstMetric(c.descs[k], prometheus.GaugeValue, v)
	}
	cnt := func(k string, v float64) {
		ch <- prometheus.MustNewConstMetric(c.descs[k], prometheus.CounterValue, v)
	}
	g("acquired", float64(s.AcquiredConns()))
	g("idle", float64(s.IdleConns()))
	g("total", float64(s.TotalConns()))
	g("max", float64(s.MaxConns()))
	cnt("acquires", float64(s.AcquireCount()))
	cnt("empty", float64(s.EmptyAcquireCount()))
	cnt("wait", s.EmptyAcquireWaitTime().Seconds())
	cnt("acquireDur", s.AcquireDuration().Seconds())
}
