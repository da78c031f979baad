package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// pruneBatch is the number of tasks one prune_finished call deletes at most: one short
// transaction each, so neither the tables nor the leader lease are held for long.
const pruneBatch = 1000

// The statuses each retention applies to.
var (
	finishedStatuses = []string{"completed", "cancelled"} // Config.Retention
	failedStatuses   = []string{"failed", "dead"}         // Config.FailedRetention
)

// runRetention, while this worker is the leader, deletes finished tasks past their retention
// with their error rows, every PruneInterval: batches until none is left or leadership is lost.
// Then it maintains the partitioned lease and event history (history.go): partitions ahead,
// the default partitions repaired, days past HistoryRetention dropped.
func (m *Maintainer) runRetention(ctx context.Context) {
	every(ctx, m.cfg.PruneInterval, func(ctx context.Context) {
		term := m.Term()
		if term == 0 {
			return
		}
		m.pruneTasks(ctx, term)
		// Independent of pruning: a prune that failed must not leave the days ahead uncreated.
		m.maintainHistory(ctx, term)
	})
}

// pruneTasks deletes the finished tasks past their retention, in batches, as the leader of
// term, and reports it with an EventPruned (an error, with EventError, instead).
func (m *Maintainer) pruneTasks(ctx context.Context, term int64) {
	total := 0
	for _, r := range []struct {
		keep     time.Duration
		statuses []string
	}{{m.cfg.Retention, finishedStatuses}, {m.cfg.FailedRetention, failedStatuses}} {
		if r.keep < 0 { // KeepForever
			continue
		}
		n, err := m.pruneAll(ctx, r.keep, r.statuses, term)
		total += n
		if err != nil {
			m.fail(ctx, "prune", err)
			return
		}
	}
	if total > 0 {
		m.log.Info("maintenance: pruned finished tasks", slog.Int("tasks", total))
	}
	m.emit(Event{Kind: EventPruned, Term: term, Tasks: total})
}

// pruneAll deletes tasks in statuses finished more than keep ago, batch by batch, while this
// worker stays the leader of term.
func (m *Maintainer) pruneAll(ctx context.Context, keep time.Duration, statuses []string, term int64) (int, error) {
	total := 0
	for ctx.Err() == nil && m.Term() == term {
		cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.LeaderTTL))
		n, ok, err := PruneFinished(cctx, m.pool, keep, pruneBatch, term, statuses...)
		cancel()
		total += n
		if err != nil || !ok || n < pruneBatch {
			return total, err
		}
	}
	return total, nil
}

// PruneFinished calls queues.prune_finished: as the leader of term, it deletes up to limit
// tasks in statuses (default: completed and cancelled) that finished more than olderThan ago,
// with their error rows, and returns how many. Their lease and event rows stay until their
// day partition is dropped (MaintainHistory). ok is false when term is stale
// (nothing was deleted).
func PruneFinished(ctx context.Context, db DB, olderThan time.Duration, limit int, term int64, statuses ...string) (n int, ok bool, err error) {
	if len(statuses) == 0 {
		statuses = finishedStatuses
	}
	var deleted *int
	if err := db.QueryRow(ctx, `select queues.prune_finished($1, $2, $3, $4::text[]::queues.task_status[])`,
		olderThan, limit, term, statuses).Scan(&deleted); err != nil {
		return 0, false, fmt.Errorf("prune finished tasks: %w", err)
	}
	if deleted == nil {
		return 0, false, nil
	}
	return *deleted, true, nil
}
