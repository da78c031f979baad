package maintenance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// DefaultHistoryAheadDays is how many days after today the leader keeps history partitions
// ready for (queues.maintain_history's _ahead_days).
const DefaultHistoryAheadDays = 2

// HistoryResult is what one queues.maintain_history call did to the partitioned history
// (docs/design.md, "Partitioned history").
type HistoryResult struct {
	// Created names the day partitions created (queues.task_lease_pYYYYMMDD,
	// queues.task_event_pYYYYMMDD): days ahead, and days the default partitions caught rows of.
	Created []string `json:"created"`
	// Moved is the number of rows moved out of the default partitions into their days.
	Moved int64 `json:"moved"`
	// Dropped names the day partitions dropped: whole days older than the history retention.
	Dropped []string `json:"dropped"`
}

// maintainHistory runs queues.maintain_history as the leader of term and reports it with an
// EventHistory.
func (m *Maintainer) maintainHistory(ctx context.Context, term int64) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout(m.cfg.LeaderTTL))
	defer cancel()
	res, ok, err := MaintainHistory(cctx, m.pool, term, m.cfg.HistoryRetention, DefaultHistoryAheadDays)
	if err != nil {
		m.fail(ctx, "history", err)
		return
	}
	if !ok {
		return
	}
	if len(res.Created) > 0 || len(res.Dropped) > 0 || res.Moved > 0 {
		m.log.Info("maintenance: history partitions",
			slog.Any("created", res.Created), slog.Int64("moved", res.Moved), slog.Any("dropped", res.Dropped))
	}
	m.emit(Event{Kind: EventHistory, Term: term, History: res})
}

// MaintainHistory calls queues.maintain_history: as the leader of term, it creates the history's
// day partitions for today to today + aheadDays (UTC) that are missing, moves the rows the
// default partitions caught into their days, and drops the day partitions that ended more than
// keep ago (KeepForever, or any negative keep, drops none). ok is false when term is stale
// (nothing was done).
func MaintainHistory(ctx context.Context, db DB, term int64, keep time.Duration, aheadDays int) (res HistoryResult, ok bool, err error) {
	var keepArg *time.Duration
	if keep >= 0 {
		keepArg = &keep
	}
	var raw []byte
	if err := db.QueryRow(ctx, `select queues.maintain_history($1, $2, $3)`, term, keepArg, aheadDays).Scan(&raw); err != nil {
		return HistoryResult{}, false, fmt.Errorf("maintain history partitions: %w", err)
	}
	if raw == nil {
		return HistoryResult{}, false, nil
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return HistoryResult{}, false, fmt.Errorf("maintain history partitions: read the result: %w", err)
	}
	return res, true, nil
}
