// Package prometheus measures a taskorch worker in Prometheus metrics: an Observer
// (WorkerConfig.Observers) that registers the taskorch_* metrics of docs/operations.md
// ("Metrics and alerts") on a registry of the program's. `taskorch worker` serves them on
// /metrics.
//
//	reg := prometheus.NewRegistry()
//	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{
//		Handlers:  hs,
//		Observers: []taskorch.Observer{taskorchprom.New(reg)},
//	})
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// It is a module of its own, so that a program that does not measure its workers with
// Prometheus does not carry its client library.
package prometheus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskorch/taskorch/tasktype"
)

// The outcomes of a failed attempt, the values of the outcome label of
// taskorch_tasks_failed_total: retried later, failed for good (not retriable), or dead (out of
// attempts).
const (
	outcomeRetry  = "retry"
	outcomeFailed = "failed"
	outcomeDead   = "dead"
)

// maintenanceOps are the op label values of taskorch_maintenance_errors_total known from the
// start, so that increase() sees the first error.
var maintenanceOps = []string{"register", "session", "heartbeat", "leadership", "reap", "session_reap", "prune", "history", "schedule", "resign", "deregister", "queue_stats"}

// Observer is a worker's Prometheus instrumentation. Make one per worker with New; NewWorker
// registers its metrics (Attach), and fails if the registry holds them already.
type Observer struct {
	reg prometheus.Registerer

	claimed    *prometheus.CounterVec
	completed  *prometheus.CounterVec
	failed     *prometheus.CounterVec
	snoozed    *prometheus.CounterVec
	refusals   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	startDelay *prometheus.HistogramVec

	runningLong *prometheus.CounterVec

	leasesLost    prometheus.Counter
	refused       prometheus.Counter
	notifications prometheus.Counter

	leader      prometheus.Gauge
	quiet       prometheus.Gauge
	reaped      prometheus.Counter
	recovered   prometheus.Counter
	sessionLost prometheus.Counter
	pruned      prometheus.Counter
	scheduled   prometheus.Counter
	missed      *prometheus.CounterVec
	maintErrors *prometheus.CounterVec

	queue *queueCollector
	tr    *transportMetrics // nil without a transport
}

var _ tasktype.HealthObserver = (*Observer)(nil)

// New returns an observer whose metrics (prefix taskorch_) NewWorker registers on reg.
// Registering fails if the names are taken: give each worker its own registry, or wrap a shared
// one for each worker with prometheus.WrapRegistererWith and a distinct label value.
func New(reg prometheus.Registerer) *Observer {
	byType := []string{"task_type"}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "taskorch", Name: name, Help: help}, labels)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "taskorch", Name: name, Help: help})
	}
	m := &Observer{
		reg:       reg,
		claimed:   counterVec("tasks_claimed_total", "Tasks claimed by this worker (one per attempt).", byType...),
		completed: counterVec("tasks_completed_total", "Tasks this worker completed.", byType...),
		failed: counterVec("tasks_failed_total",
			"Failed attempts recorded by this worker, by outcome: retry (retried later), failed (not retriable), dead (out of attempts).",
			"task_type", "outcome"),
		snoozed: counterVec("tasks_snoozed_total", "Tasks a handler snoozed.", byType...),
		runningLong: counterVec("tasks_running_long_total",
			"Attempts that ran longer than their type's warning threshold (WorkerConfig.WarnRunningAfter, HandlerOpts.WarnAfter), counted once each when it passed.", byType...),
		refusals: counterVec("provider_refusals_total",
			"Channel tasks (email, sms, file_delete) whose provider refused the call for good (retrying cannot succeed: a bounce, an invalid number), once recorded.",
			byType...),
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
		quiet: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "taskorch", Name: "worker_quiet",
			Help: "1 while an operator has this worker quiet (it finishes what it runs and claims nothing more), else 0."}),
		reaped:      counter("workers_reaped_total", "Dead workers this worker removed as leader: their session gone for the grace, or silent past the worker timeout."),
		recovered:   counter("tasks_recovered_total", "Running tasks of reaped workers this worker returned to pending as leader."),
		sessionLost: counter("worker_sessions_lost_total", "Times this worker's session connection was lost and opened again (docs/operations.md, \"Crashed workers\")."),
		pruned:      counter("tasks_pruned_total", "Finished tasks this worker deleted as leader (retention)."),
		scheduled:   counter("schedule_ticks_total", "Periodic schedule ticks this worker enqueued (or found enqueued) as leader."),
		missed:      counterVec("schedule_ticks_missed_total", "Schedule ticks this worker as leader enqueued late (reason=late) or skipped as older than the catch-up window (reason=skipped).", "reason"),
		maintErrors: counterVec("maintenance_errors_total", "Failed maintenance operations, retried at their next interval.", "op"),
		queue:       &queueCollector{},
	}
	for _, op := range maintenanceOps {
		m.maintErrors.WithLabelValues(op)
	}
	// Known from the start, so that increase() sees the first missed tick.
	m.missed.WithLabelValues("late")
	m.missed.WithLabelValues("skipped")
	return m
}

// Attach registers the metrics on the registry New was given: the worker's, its pool's
// statistics, and with a transport the transport's (taskorch_transport_*, with a transport
// label). The per-type counters of the types the worker handles start at 0, so that increase()
// sees the first event of each after a restart. NewWorker calls it.
func (m *Observer) Attach(w tasktype.WorkerInfo) error {
	if m.reg == nil {
		return fmt.Errorf("registering worker metrics: the prometheus observer has no registry (make it with prometheus.New)")
	}
	for _, typ := range w.TaskTypes {
		m.claimed.WithLabelValues(typ)
		m.completed.WithLabelValues(typ)
		m.snoozed.WithLabelValues(typ)
		m.runningLong.WithLabelValues(typ)
		for _, outcome := range []string{outcomeRetry, outcomeFailed, outcomeDead} {
			m.failed.WithLabelValues(typ, outcome)
		}
	}
	for _, typ := range w.Channels {
		m.refusals.WithLabelValues(typ)
	}
	cs := []prometheus.Collector{m.claimed, m.completed, m.failed, m.snoozed, m.refusals, m.runningLong, m.duration, m.startDelay,
		m.leasesLost, m.refused, m.notifications, m.leader, m.quiet, m.reaped, m.recovered, m.sessionLost, m.pruned, m.scheduled,
		m.missed, m.maintErrors, m.queue}
	if w.Pool != nil {
		cs = append(cs, newPoolCollector(w.Pool))
	}
	if w.LongestRunning != nil {
		cs = append(cs, runningCollector(w.LongestRunning))
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("registering worker metrics: %v (give each worker its own registry, or wrap each worker's with prometheus.WrapRegistererWith and a distinct label)", err)
		}
	}
	if w.Transport != "" {
		tr, err := newTransportMetrics(m.reg, w.Transport)
		if err != nil {
			return err
		}
		m.tr = tr
	}
	return nil
}

// TaskStarted counts a claimed task and how long it waited after becoming due.
func (m *Observer) TaskStarted(ctx context.Context, t *tasktype.Task) context.Context {
	m.claimed.WithLabelValues(t.Type).Inc()
	m.startDelay.WithLabelValues(t.Type).Observe(max(time.Since(t.RunAt).Seconds(), 0))
	return ctx
}

// TaskFinished counts what became of a run, and how long it took.
func (m *Observer) TaskFinished(_ context.Context, t *tasktype.Task, f tasktype.TaskFinish) {
	switch f.Outcome {
	case tasktype.OutcomeRefused:
		m.refused.Inc()
	case tasktype.OutcomeLeaseLost:
		m.leasesLost.Inc()
	case tasktype.OutcomeSnoozed:
		m.snoozed.WithLabelValues(t.Type).Inc()
	case tasktype.OutcomeFailed:
		outcome := outcomeRetry
		switch f.Status {
		case tasktype.StatusFailed:
			outcome = outcomeFailed
		case tasktype.StatusDead:
			outcome = outcomeDead
		}
		m.failed.WithLabelValues(t.Type, outcome).Inc()
	case tasktype.OutcomeCompleted:
		m.completed.WithLabelValues(t.Type).Inc()
	}
	if f.ProviderRefused {
		m.refusals.WithLabelValues(t.Type).Inc()
	}
	m.duration.WithLabelValues(t.Type).Observe(f.Duration.Seconds())
}

// WorkerEvent counts what happened to the worker: leases lost, notifications, the leader's
// work, maintenance errors, and the transport's messages.
func (m *Observer) WorkerEvent(e tasktype.WorkerEvent) {
	switch e.Kind {
	case tasktype.EventLeaseLost:
		m.leasesLost.Inc()
	case tasktype.EventNotified:
		m.notifications.Inc()
	case tasktype.EventElected:
		m.leader.Set(1)
	case tasktype.EventDeposed:
		m.leader.Set(0)
		m.queue.set(nil) // the next leader reports the queues
		m.queue.setHealth(nil)
	case tasktype.EventReaped:
		m.reaped.Add(float64(e.Workers))
		m.recovered.Add(float64(e.Tasks))
	case tasktype.EventRunningLong:
		m.runningLong.WithLabelValues(e.Task.Type).Inc()
	case tasktype.EventQuiet:
		if e.On {
			m.quiet.Set(1)
		} else {
			m.quiet.Set(0)
		}
	case tasktype.EventSessionLost:
		m.sessionLost.Inc()
	case tasktype.EventPruned:
		m.pruned.Add(float64(e.Tasks))
	case tasktype.EventScheduled:
		m.scheduled.Inc()
		if e.Late {
			m.missed.WithLabelValues("late").Inc()
		}
	case tasktype.EventTicksMissed:
		m.missed.WithLabelValues("skipped").Add(float64(e.N))
	case tasktype.EventMaintenanceError:
		m.maintErrors.WithLabelValues(e.Op).Inc()
	case tasktype.EventTasksDead:
		m.failed.WithLabelValues(e.TaskType, outcomeDead).Add(float64(e.N))
	default:
		m.tr.event(e)
	}
}

// QueueStats keeps the leader's last queue sample for the queue gauges (nil: none, this worker
// does not lead). The dead-task series of each type in it start at 0, so that increase() sees
// the first of its tasks the leader finds gone dead (EventTasksDead) even on a worker that
// does not handle the type. The counters are per task type: a SQL function's queue
// (db_function:<schema.function>) starts db_function's.
func (m *Observer) QueueStats(stats []tasktype.QueueStat) {
	for _, s := range stats {
		typ := s.TaskType
		if strings.HasPrefix(typ, functionQueuePrefix) {
			typ = tasktype.TypeDBFunction
		}
		m.failed.WithLabelValues(typ, outcomeDead)
	}
	m.queue.set(stats)
}

// HealthStats keeps the leader's last sample of the paused queues, the history's default
// partition and the failed processes for their gauges (nil: none, this worker does not lead).
func (m *Observer) HealthStats(h *tasktype.HealthStats) { m.queue.setHealth(h) }

// queueCollector reports the last queue sample as a whole, so a scrape never sees half of one.
type queueCollector struct {
	mu     sync.Mutex
	stats  []tasktype.QueueStat
	health *tasktype.HealthStats
}

// functionQueuePrefix starts the queue name of one SQL function's db_function tasks,
// db_function:<schema.function>, which the queue gauges carry as their task_type label (the
// functions a database defines are few: docs/operations.md, "Metrics and alerts").
const functionQueuePrefix = tasktype.TypeDBFunction + ":"

var (
	queueDepthDesc = prometheus.NewDesc("taskorch_queue_depth",
		"Tasks waiting, pending or running, by queue (task_type: a task type, or db_function:<schema.function> for one SQL function's tasks) and status; sampled by the leader only.", []string{"task_type", "status"}, nil)
	oldestPendingDesc = prometheus.NewDesc("taskorch_oldest_pending_age_seconds",
		"How long the longest-waiting due pending task of the type has waited (now minus its run_at, database clock); sampled by the leader only.",
		[]string{"task_type"}, nil)
	unservedDesc = prometheus.NewDesc("taskorch_queue_unserved",
		"1 while the type has due pending tasks and no live worker claims it (none has its handler or provider), else 0; sampled by the leader only.",
		[]string{"task_type"}, nil)
	pausedDesc = prometheus.NewDesc("taskorch_queue_paused",
		"1 while the queue is paused (taskorch queues pause; a db_function:<schema.function> queue also while db_function is), else 0, for every paused queue and every queue with waiting, pending or running tasks; sampled by the leader only.",
		[]string{"task_type"}, nil)
	defaultPartitionDesc = prometheus.NewDesc("taskorch_history_default_partition_rows",
		"Rows in the task history's default partition (queues.task_event_default), counted up to 10000: 0 while the leader makes each day's partition ahead; sampled by the leader only.",
		nil, nil)
	processesFailedDesc = prometheus.NewDesc("taskorch_processes_failed_last_hour",
		"Instances of the business process that failed (their terminal failed fact) in the last hour, counted up to 10000, for every registered process; sampled by the leader only.",
		[]string{"process"}, nil)
)

func (c *queueCollector) setHealth(h *tasktype.HealthStats) {
	c.mu.Lock()
	c.health = h
	c.mu.Unlock()
}

func (c *queueCollector) set(stats []tasktype.QueueStat) {
	c.mu.Lock()
	c.stats = stats
	c.mu.Unlock()
}

// Describe sends the queue gauges' descriptions.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- oldestPendingDesc
	ch <- unservedDesc
	ch <- pausedDesc
	ch <- defaultPartitionDesc
	ch <- processesFailedDesc
}

// Collect sends the last sample.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	stats, health := c.stats, c.health
	c.mu.Unlock()
	if health != nil {
		paused := map[string]bool{}
		for _, typ := range health.Paused {
			paused[typ] = true
			ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, 1, typ)
		}
		seen := map[string]bool{}
		for _, s := range stats {
			if !paused[s.TaskType] && !seen[s.TaskType] {
				seen[s.TaskType] = true
				// One SQL function's queue (db_function:<schema.function>) is held by its own
				// pause and by the pause of db_function.
				held := 0.0
				if strings.HasPrefix(s.TaskType, functionQueuePrefix) && paused[tasktype.TypeDBFunction] {
					held = 1
				}
				ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, held, s.TaskType)
			}
		}
		ch <- prometheus.MustNewConstMetric(defaultPartitionDesc, prometheus.GaugeValue, float64(health.DefaultPartitionRows))
		for process, n := range health.ProcessesFailed {
			ch <- prometheus.MustNewConstMetric(processesFailedDesc, prometheus.GaugeValue, float64(n), process)
		}
	}
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(s.Tasks), s.TaskType, s.Status)
		if s.Status == string(tasktype.StatusPending) {
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

// Describe sends the pool metrics' descriptions.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads the pool's statistics now.
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

var runningLongestDesc = prometheus.NewDesc("taskorch_task_running_longest_seconds",
	"How long the longest attempt of each task type running on this worker now has run (no series: none runs); max by (task_type) over the workers finds the fleet's longest.",
	[]string{"task_type"}, nil)

// runningCollector reports the worker's longest-running attempt of each type at scrape time.
type runningCollector func() map[string]time.Duration

func (c runningCollector) Describe(ch chan<- *prometheus.Desc) { ch <- runningLongestDesc }

func (c runningCollector) Collect(ch chan<- prometheus.Metric) {
	for typ, d := range c() {
		ch <- prometheus.MustNewConstMetric(runningLongestDesc, prometheus.GaugeValue, d.Seconds(), typ)
	}
}
