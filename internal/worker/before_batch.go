package worker

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskorch/taskorch/internal/batcher"
)

// maxBeforeBatch bounds how many before handlers run in one statement.
const maxBeforeBatch = 100

// beforeCall is one channel task's before handler and its payload.
type beforeCall struct {
	handler string
	payload json.RawMessage
}

// newBeforeBatcher batches the before handlers of the worker's channel tasks: the calls made
// while one statement runs go together into the next (internal.run_functions, migration
// core/0030), each distinct function checked once and called for all its payloads in one query.
func (w *Worker) newBeforeBatcher() *batcher.Batcher[beforeCall, []byte] {
	return batcher.New(maxBeforeBatch, w.runBeforeHandlers)
}

// runBeforeHandlers runs one batch of before handlers, in one statement when there are several.
// When the server refuses the batch (a handler raised, or the runner refused a name or a
// payload), each call runs on its own (internal.run_function), so only the one at fault fails,
// with the runner's own message.
func (w *Worker) runBeforeHandlers(ctx context.Context, calls []beforeCall) ([]batcher.Result[[]byte], error) {
	if len(calls) > 1 {
		handlers := make([]string, len(calls))
		payloads := make([][]byte, len(calls))
		for i, c := range calls {
			handlers[i], payloads[i] = c.handler, c.payload
		}
		var results []batcher.Result[[]byte]
		rows, err := w.pool.Query(ctx, `select ord, result from internal.run_functions($1, $2)`, handlers, payloads)
		if err == nil {
			results, err = batcher.ReadOrdered(rows, len(calls))
		}
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || transient(err) {
			return results, err
		}
	}
	results := make([]batcher.Result[[]byte], len(calls))
	for i, c := range calls {
		results[i].Err = w.pool.QueryRow(ctx, `select internal.run_function($1, $2)`, c.handler, []byte(c.payload)).Scan(&results[i].Value)
	}
	return results, nil
}
