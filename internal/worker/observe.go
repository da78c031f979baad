package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/maintenance"
	"github.com/taskorch/taskorch/tasktype"
)

// observers are the worker's observers (WorkerConfig.Observers: the metrics, the traces), told
// what happens in the order the worker sees it. With none, every call does nothing.
type observers []tasktype.Observer

// taskStarted tells the observers a task starts and returns the context it runs on.
func (os observers) taskStarted(ctx context.Context, t *tasktype.Task) context.Context {
	for _, o := range os {
		ctx = o.TaskStarted(ctx, t)
	}
	return ctx
}

// taskFinished tells the observers what became of a task's run, once it is written.
func (os observers) taskFinished(ctx context.Context, t *tasktype.Task, f tasktype.TaskFinish) {
	for _, o := range os {
		o.TaskFinished(ctx, t, f)
	}
}

func (os observers) event(e tasktype.WorkerEvent) {
	for _, o := range os {
		o.WorkerEvent(e)
	}
}

// maintenanceEvent passes on what the maintainer did that observers count.
func (os observers) maintenanceEvent(e maintenance.Event) {
	if len(os) == 0 {
		return
	}
	var we tasktype.WorkerEvent
	switch e.Kind {
	case maintenance.EventElected:
		we.Kind = tasktype.EventElected
	case maintenance.EventDeposed:
		we.Kind = tasktype.EventDeposed
	case maintenance.EventReaped:
		we = tasktype.WorkerEvent{Kind: tasktype.EventReaped, Workers: len(e.Workers), Tasks: e.Tasks}
	case maintenance.EventSessionLost:
		we = tasktype.WorkerEvent{Kind: tasktype.EventSessionLost, Err: e.Err}
	case maintenance.EventPruned:
		we = tasktype.WorkerEvent{Kind: tasktype.EventPruned, Tasks: e.Tasks}
	case maintenance.EventScheduled:
		we = tasktype.WorkerEvent{Kind: tasktype.EventScheduled, Late: e.Late}
	case maintenance.EventTicksMissed:
		we = tasktype.WorkerEvent{Kind: tasktype.EventTicksMissed, N: e.Missed}
	case maintenance.EventError:
		we = tasktype.WorkerEvent{Kind: tasktype.EventMaintenanceError, Op: e.Op, Err: e.Err}
	default:
		return
	}
	os.event(we)
}

// queueObservers are the observers that want the queues' depth.
func (os observers) queueObservers() []tasktype.QueueObserver {
	var qs []tasktype.QueueObserver
	for _, o := range os {
		if q, ok := o.(tasktype.QueueObserver); ok {
			qs = append(qs, q)
		}
	}
	return qs
}

// runQueueStats samples queue depth, the oldest pending age and the types no live worker claims
// every QueueStatsInterval while this worker leads, for the observers that want them (none: no
// sampling): one queues.queue_stats() call, which counts only waiting, pending and running tasks; with
// it queues.health_stats() for the HealthObservers, and queues.take_dead_tally(), whose tasks
// gone dead without a worker recording it are told to every observer (EventTasksDead). While
// it does not lead it reports none: the other workers report no queue gauges, so the numbers
// are not repeated per worker.
func (w *Worker) runQueueStats(ctx context.Context) {
	qs := w.obs.queueObservers()
	if len(qs) == 0 {
		return
	}
	var hs []tasktype.HealthObserver
	for _, q := range qs {
		if h, ok := q.(tasktype.HealthObserver); ok {
			hs = append(hs, h)
		}
	}
	report := func(stats []tasktype.QueueStat) {
		for _, q := range qs {
			q.QueueStats(stats)
		}
	}
	reportHealth := func(health *tasktype.HealthStats) {
		for _, h := range hs {
			h.HealthStats(health)
		}
	}
	tick := time.NewTicker(w.cfg.QueueStatsInterval)
	defer tick.Stop()
	for {
		if w.maint.IsLeader() {
			if stats, ok := w.sampleQueues(ctx); ok {
				report(stats)
			}
			// A sample that failed keeps the last one, as for the queues.
			if len(hs) > 0 {
				if health := w.sampleHealth(ctx); health != nil {
					reportHealth(health)
				}
			}
			w.takeDeadTally(ctx)
		} else {
			report(nil)
			reportHealth(nil)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *Worker) sampleQueues(ctx context.Context) ([]tasktype.QueueStat, bool) {
	sctx, cancel := context.WithTimeout(ctx, max(w.cfg.QueueStatsInterval, 5*time.Second))
	defer cancel()
	rows, err := w.pool.Query(sctx, `select task_type, status, tasks, oldest_pending_age_seconds, due, workers from queues.queue_stats()`)
	var stats []tasktype.QueueStat
	if err == nil {
		stats, err = pgx.CollectRows(rows, pgx.RowToStructByPos[tasktype.QueueStat])
	}
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("could not sample queue depth; retrying at the next interval", "error", err)
			w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventMaintenanceError, Op: "queue_stats", Err: err})
		}
		return nil, false
	}
	return stats, true
}

// sampleHealth samples queues.health_stats() (nil when it failed: logged and counted as a
// queue_stats maintenance error, retried at the next interval).
func (w *Worker) sampleHealth(ctx context.Context) *tasktype.HealthStats {
	sctx, cancel := context.WithTimeout(ctx, max(w.cfg.QueueStatsInterval, 5*time.Second))
	defer cancel()
	rows, err := w.pool.Query(sctx, `select metric, label, value from queues.health_stats()`)
	h := &tasktype.HealthStats{ProcessesFailed: map[string]int64{}}
	if err == nil {
		var metric, label string
		var value int64
		_, err = pgx.ForEachRow(rows, []any{&metric, &label, &value}, func() error {
			switch metric {
			case "queue_paused":
				h.Paused = append(h.Paused, label)
			case "default_partition_rows":
				h.DefaultPartitionRows = value
			case "processes_failed":
				h.ProcessesFailed[label] = value
			}
			return nil
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("could not sample the paused queues, the history's default partition and the failed processes; retrying at the next interval", "error", err)
			w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventMaintenanceError, Op: "queue_stats", Err: err})
		}
		return nil
	}
	return h
}

// takeDeadTally tells the observers the tasks gone dead by lease expiry or a dead worker's
// recovery since the last call (queues.take_dead_tally), which no worker's TaskFinished saw.
func (w *Worker) takeDeadTally(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, max(w.cfg.QueueStatsInterval, 5*time.Second))
	defer cancel()
	rows, err := w.pool.Query(sctx, `select task_type, dead from queues.take_dead_tally()`)
	var events []tasktype.WorkerEvent
	if err == nil {
		var typ string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&typ, &n}, func() error {
			events = append(events, tasktype.WorkerEvent{Kind: tasktype.EventTasksDead, TaskType: typ, N: int(n)})
			return nil
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("could not count the tasks gone dead by lease expiry or recovery; retrying at the next interval", "error", err)
			w.obs.event(tasktype.WorkerEvent{Kind: tasktype.EventMaintenanceError, Op: "queue_stats", Err: err})
		}
		return
	}
	for _, e := range events {
		w.obs.event(e)
	}
}
