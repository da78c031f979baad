package bench_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/bench"
)

// app-tx alternates the order rows alone with order rows plus an enqueue, counts what each
// committed, and leaves no application table behind; every transaction that enqueued and
// committed left exactly one task (AppTx checks the count itself).
func TestAppTx(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.AppTx(t.Context(), e, bench.AppTxConfig{Connections: 4, Duration: 300 * time.Millisecond,
		Warmup: 100 * time.Millisecond, Rounds: 2})
	require.NoError(t, err)
	require.Equal(t, 4, r.Connections)
	require.Zero(t, r.Workers)
	for _, s := range []bench.AppTxSide{r.Order, r.Enqueue} {
		require.Len(t, s.Runs, 2)
		require.Positive(t, s.TxPerSecond)
		require.Contains(t, s.Runs, s.TxPerSecond, "the median is one of the runs")
		require.Positive(t, s.CPU.Client)
	}
	require.Positive(t, r.Tasks)
	require.InDelta(t, r.Enqueue.TxPerSecond/r.Order.TxPerSecond, r.Ratio, 0.001)
	require.Zero(t, r.Enqueue.Notifications, "no worker waits, so no enqueue notifies")
	require.Zero(t, scalar[int](t, e.Admin(), `select count(*)::int from pg_tables where tablename like 'taskorch_bench_order_%'`),
		"the application's table is dropped")

	m := asJSON(t, r)
	require.Equal(t, "app-tx", m["mode"])
	for _, k := range []string{"order_tx_per_second", "enqueue_tx_per_second", "ratio", "order_only", "enqueue", "tasks"} {
		require.Contains(t, m, k)
	}

	// With a worker working the tasks as they come.
	w, err := bench.AppTx(t.Context(), e, bench.AppTxConfig{Connections: 4, Duration: 300 * time.Millisecond,
		Warmup: 100 * time.Millisecond, Rounds: 1, Workers: 1, Concurrency: 10})
	require.NoError(t, err)
	require.Equal(t, 1, w.Workers)
	require.Equal(t, 10, w.Concurrency)
	require.Positive(t, w.Enqueue.TxPerSecond)
}
