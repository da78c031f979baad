package batcher

import (
	"github.com/jackc/pgx/v5"
)

// ReadOrdered reads the rows of a batch statement that answers n calls with (ord, value) rows,
// ord counting the calls from 1 (internal.run_functions, queues.record_outbox_messages): one
// Result per call, in the calls' order. A call no row answered keeps a nil value.
func ReadOrdered(rows pgx.Rows, n int) ([]Result[[]byte], error) {
	results := make([]Result[[]byte], n)
	var ord int
	var raw []byte
	_, err := pgx.ForEachRow(rows, []any{&ord, &raw}, func() error {
		if ord >= 1 && ord <= n {
			results[ord-1].Value = append([]byte(nil), raw...)
		}
		return nil
	})
	return results, err
}
