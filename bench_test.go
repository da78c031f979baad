package taskorch_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// Every benchmark's op is one task; each reports tasks/s. Run them with `make bench`, which starts a PostgreSQL with
// default durability (fsync on) for the run; the figures and how they moved are in
// docs/benchmarks.md.

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) TaskType() string { return "noop" }

func BenchmarkEnqueue(b *testing.B) {
	ctx := context.Background()
	c, err := taskorch.NewClient(dbtest.NewDB(b), nil)
	require.NoError(b, err)
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.Enqueue(ctx, noopArgs{N: i}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkEnqueueMany enqueues b.N tasks in batches (one op is one task).
func BenchmarkEnqueueMany(b *testing.B) {
	for _, batch := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ctx := context.Background()
			c, err := taskorch.NewClient(dbtest.NewDB(b), nil)
			require.NoError(b, err)
			params := make([]taskorch.EnqueueParams, batch)
			for i := range params {
				params[i] = taskorch.EnqueueParams{Args: noopArgs{N: i}}
			}
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				if _, err := c.EnqueueMany(ctx, params[:min(batch, b.N-done)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkClaimComplete claims pending tasks in batches and completes each batch in one
// statement, as a worker does, on an empty table and with 1,000,000 finished tasks (and their
// lease and event history) in it. The two figures should be within 10% of each other: the claim
// index holds pending tasks only.
func BenchmarkClaimComplete(b *testing.B) {
	const batch = 500
	for _, history := range []int{0, 1_000_000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 4})
			fillHistory(b, pool, history)
			b.ResetTimer()
			benchClaimComplete(b, pool, batch)
		})
	}
}

func benchClaimComplete(b *testing.B, pool *pgxpool.Pool, batch int) {
	ctx := context.Background()
	b.StopTimer()
	mustExec(b, pool, `select queues.enqueue_many(array_fill('noop'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, b.N)
	mustExec(b, pool, `analyze queues.task`)
	b.StartTimer()
	done := 0
	ids := make([]int64, 0, batch)
	leases := make([]int64, 0, batch)
	for done < b.N {
		ids, leases = ids[:0], leases[:0]
		rows, err := pool.Query(ctx, `select task_id, lease_id from queues.claim_tasks('bench', $1)`, batch)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var id, lease int64
			if err := rows.Scan(&id, &lease); err != nil {
				b.Fatal(err)
			}
			ids, leases = append(ids, id), append(leases, lease)
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		if len(ids) == 0 {
			b.Fatalf("ran dry after %d of %d tasks", done, b.N)
		}
		var n int
		if err := pool.QueryRow(ctx, `select count(*) from queues.complete_tasks($1, $2)`, ids, leases).Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n != len(ids) {
			b.Fatalf("completed %d of %d", n, len(ids))
		}
		done += n
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// fillHistory inserts n completed tasks, each with its lease (a claim and a completion write no
// event), as a long-running system would have, then vacuums so the planner sees the table as it would be.
func fillHistory(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	if n == 0 {
		return
	}
	mustExec(b, pool, `insert into queues.task (task_type, payload, status, attempt, lease_id, worker_id, claimed_at, completed_at, enqueued_at, scheduled_at, run_at)
		select 'noop', jsonb_build_object('n', g), 'completed', 1, g, 'old-worker', now(), now(), now(), now(), now()
		from generate_series(1, $1::int) g`, n)
	mustExec(b, pool, `insert into queues.task_lease (task_id, worker_id, attempt, leased_at, expires_at)
		select g, 'old-worker', 1, now(), now() + interval '5 minutes' from generate_series(1, $1::int) g`, n)
	mustExec(b, pool, `vacuum analyze queues.task`)
	mustExec(b, pool, `vacuum analyze queues.task_lease`)
}

// BenchmarkOneRowWrite measures the server's own time for one-row statements, the kind an
// application's transaction makes: a loop inside the server (one DO block, one transaction), so
// neither round trips nor commits count. "app-row" inserts a row into a four-column table with an
// identity key (the application's own row: the baseline); "insert_task" enqueues one task a
// statement as the Go client does for a task that names no function (queues.insert_task). Each
// reports µs/stmt; docs/benchmarks.md ("The cost of a one-row write") has the figures.
func BenchmarkOneRowWrite(b *testing.B) {
	pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 2})
	mustExec(b, pool, `create table bench_order (id bigint generated always as identity primary key,
		customer text not null, amount numeric not null, created_at timestamptz not null default now())`)
	for _, tc := range []struct{ name, stmt string }{
		{"app-row", `insert into bench_order (customer, amount) values ('c', 10)`},
		{"insert_task", `perform queues.insert_task('bench', '{"order_id": 1}'::jsonb, now(), 0, null, null)`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ResetTimer()
			mustExec(b, pool, `do $$ begin for i in 1..`+strconv.Itoa(b.N)+` loop `+tc.stmt+`; end loop; end $$`)
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/stmt")
		})
	}
}
