package taskorch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// Statements that update several tasks lock them in task_id order (docs/design.md, "Which
// statement locks what"), so a worker's lease renewal, its completer's batches and a release
// hammering the same tasks from three sessions, each given the tasks in a different order,
// never deadlock: no statement fails with 40P01, and every task ends completed or released.
func TestRenewalAndCompletionNeverDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newClient(t)
	const n = 600
	mustExec(t, pool, `select queues.enqueue_many(array_fill('hammer'::text, array[$1::int]), array_fill('{}'::jsonb, array[$1::int]))`, n)
	var ids, leases []int64
	rows, err := pool.Query(ctx, `select task_id, lease_id from queues.claim_tasks('w', $1) order by task_id`, n)
	require.NoError(t, err)
	for rows.Next() {
		var id, lease int64
		require.NoError(t, rows.Scan(&id, &lease))
		ids, leases = append(ids, id), append(leases, lease)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ids, n)

	reversed := func(a []int64) []int64 { b := slices.Clone(a); slices.Reverse(b); return b }
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	done := make(chan struct{})
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				errs <- err
			}
		}()
	}
	// Renewal of every lease, over and over, in descending order, until the others are done.
	for _, order := range [][]int64{ids, reversed(ids)} {
		run(func() error {
			ls := leases
			if order[0] != ids[0] {
				ls = reversed(leases)
			}
			for {
				select {
				case <-done:
					return nil
				default:
				}
				if _, err := pool.Exec(ctx, `select count(*) from queues.renew_leases($1, $2, interval '5 minutes')`, order, ls); err != nil {
					return err
				}
			}
		})
	}
	// Completions in batches of 50 interleaved from both ends, and releases of every tenth task.
	var work sync.WaitGroup
	work.Add(2)
	go func() {
		defer work.Done()
		for i := 0; i+50 <= n; i += 100 {
			b, bl := reversed(ids[i:i+50]), reversed(leases[i:i+50])
			if _, err := pool.Exec(ctx, `select count(*) from queues.complete_tasks_with_results($1, $2, null)`, b, bl); err != nil {
				errs <- err
			}
		}
	}()
	go func() {
		defer work.Done()
		for i := 50; i+50 <= n; i += 100 {
			var b, bl []int64
			for j := i; j < i+50; j++ {
				if j%10 == 0 {
					if _, err := pool.Exec(ctx, `select count(*) from queues.release_tasks($1, $2)`,
						[]int64{ids[j], ids[j-1]}, []int64{leases[j], leases[j-1]}); err != nil {
						errs <- err
					}
					continue
				}
				b, bl = append(b, ids[j]), append(bl, leases[j])
			}
			if _, err := pool.Exec(ctx, `select count(*) from queues.complete_tasks_with_results($1, $2, null)`, b, bl); err != nil {
				errs <- err
			}
		}
	}()
	work.Wait()
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "40P01" {
			t.Fatalf("deadlock: %s (%s)", pe.Message, pe.Detail)
		}
		require.NoError(t, err)
	}
	// Every task was completed or released by one of the batches.
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.task where status = 'running'`))
	require.Equal(t, int64(n), scalar[int64](t, pool, `select count(*) from queues.task where status in ('completed', 'pending')`))
}
