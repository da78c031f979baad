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
// sampling): one queues.queue_stats() call, which counts only pending and running tasks. While
// it does not lead it reports none: the other workers report no queue gauges, so the numbers
// are not repeated per worker.
func (w *Worker) runQueueStats(ctx context.Context) {
	qs := w.obs.queueObservers()
	if len(qs) == 0 {
		return
	}
	report := func(stats []tasktype.QueueStat) {
		for _, q := range qs {
			q.QueueStats(stats)
		}
	}
	tick := time.NewTicker(w.cfg.QueueStatsInterval)
	defer tick.Stop()
	for {
		if w.maint.IsLeader() {
			if stats, ok := w.sampleQueues(ctx); ok {
				report(stats)
			}
		} else {
			report(nil)
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
