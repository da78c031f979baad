package worker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/internal/batcher"
)

// A durable workflow reads its checkpoints when it starts and writes one after each plain step
// (docs/workflows.md, "Durable workflows in Go"). Its run waits for each, as before: a step's
// checkpoint has committed when Step returns. What the worker adds is grouping: the reads of the
// workflows that start while one read runs go together into the next statement
// (queues.workflow_steps_of), and so do the checkpoints of the steps that finish while one write
// runs (queues.record_workflow_steps), as the completer groups completions. Alone, a call costs
// one statement, as before.

// maxCheckpointBatch bounds the calls of one grouped statement.
const maxCheckpointBatch = 500

// Checkpoint is one plain step's checkpoint: the step at position Seq of the workflow task
// TaskID, named Name, run under lease LeaseID from StartedAt, with its JSON result.
type Checkpoint struct {
	TaskID, LeaseID int64
	Seq             int
	Name            string
	Result          json.RawMessage
	StartedAt       time.Time
}

// StoredCall is one checkpoint as read back: a durable call's position, kind, name, result and
// (for a sleep or a signal wait) wake time.
type StoredCall struct {
	Seq        int
	Kind, Name string
	Result     json.RawMessage
	WakeAt     *time.Time
}

// Stored is a workflow's checkpoints in call order, and the database's clock when they were read
// (zero when there are none).
type Stored struct {
	Calls  []StoredCall
	ReadAt time.Time
}

// Checkpoints groups the checkpoint reads and writes of a worker's durable workflows. Get one
// from a handler's context with CheckpointsFrom.
type Checkpoints struct {
	writes *batcher.Batcher[Checkpoint, bool]
	reads  *batcher.Batcher[int64, Stored]
}

// newCheckpoints returns the grouping of a worker whose pool is pool.
func newCheckpoints(pool *pgxpool.Pool) *Checkpoints {
	return &Checkpoints{
		writes: batcher.New(maxCheckpointBatch, func(ctx context.Context, cs []Checkpoint) ([]batcher.Result[bool], error) {
			return writeCheckpoints(ctx, pool, cs)
		}),
		reads: batcher.New(maxCheckpointBatch, func(ctx context.Context, ids []int64) ([]batcher.Result[Stored], error) {
			return readCheckpoints(ctx, pool, ids)
		}),
	}
}

// Record writes c under its lease, grouped with the checkpoints other workflows write at the same
// time, and returns whether it was recorded: false when the lease is not the task's current one
// (or the position holds a checkpoint already), nothing written. c's name must be 1 to 200
// bytes and its Seq between 1 and 100,000: the group's statement refuses the whole group
// otherwise.
func (c *Checkpoints) Record(ctx context.Context, cp Checkpoint) (bool, error) {
	return c.writes.Do(ctx, cp)
}

// Load reads the checkpoints of workflow task id, grouped with the reads of other workflows.
func (c *Checkpoints) Load(ctx context.Context, id int64) (Stored, error) {
	return c.reads.Do(ctx, id)
}

// writeCheckpoints runs one group of checkpoint writes.
func writeCheckpoints(ctx context.Context, q Querier, cs []Checkpoint) ([]batcher.Result[bool], error) {
	n := len(cs)
	ids, leases := make([]int64, n), make([]int64, n)
	seqs, names := make([]int, n), make([]string, n)
	results, started := make([]json.RawMessage, n), make([]time.Time, n)
	for i, c := range cs {
		ids[i], leases[i], seqs[i], names[i], results[i], started[i] = c.TaskID, c.LeaseID, c.Seq, c.Name, c.Result, c.StartedAt
	}
	rows, err := q.Query(ctx, `select recorded from queues.record_workflow_steps($1, $2, $3, $4, $5, $6)`,
		ids, leases, seqs, names, results, started)
	if err != nil {
		return nil, err
	}
	out := make([]batcher.Result[bool], 0, n)
	var ok bool
	_, err = pgx.ForEachRow(rows, []any{&ok}, func() error {
		out = append(out, batcher.Result[bool]{Value: ok})
		return nil
	})
	return out, err
}

// readCheckpoints runs one group of checkpoint reads.
func readCheckpoints(ctx context.Context, q Querier, ids []int64) ([]batcher.Result[Stored], error) {
	rows, err := q.Query(ctx, `select task_id, seq, kind, name, result, wake_at, read_at from queues.workflow_steps_of($1)`, ids)
	if err != nil {
		return nil, err
	}
	byTask := make(map[int64]*Stored, len(ids))
	var id int64
	var c StoredCall
	var readAt time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &c.Seq, &c.Kind, &c.Name, &c.Result, &c.WakeAt, &readAt}, func() error {
		s := byTask[id]
		if s == nil {
			s = &Stored{}
			byTask[id] = s
		}
		s.Calls = append(s.Calls, c)
		s.ReadAt = readAt
		c = StoredCall{}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]batcher.Result[Stored], len(ids))
	for i, id := range ids {
		if s := byTask[id]; s != nil {
			out[i].Value = *s
		}
	}
	return out, nil
}
