package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// seedMillionSQL makes 1,000,000 tasks as a busy week leaves them (docs/dashboard.md,
// "Performance"): 10 task types (one rare: 100 tasks), enqueued over 7 days in id order; 90%
// completed, 3% cancelled, 0.5% failed, 0.5% dead, 1% running, 5% pending (a fifth of them
// scheduled for later); an idempotency key on every tenth; with their history: a lease and two
// events per claimed task.
const seedMillionSQL = `
insert into queues.task (task_id, task_type, payload, priority, idempotency_key, scheduled_at, enqueued_at,
                         max_attempts, status, run_at, attempt, lease_id, lease_expires_at, worker_id, last_error,
                         claimed_at, completed_at, failed_at, dead_at, cancelled_at)
overriding system value
select i,
       case when i % 10000 = 0 then 'rare.type' else (array['email.send', 'email.send', 'email.send', 'sms.send', 'report.build',
            'image.resize', 'image.resize', 'webhook.deliver', 'billing.charge', 'db_function'])[1 + i % 10] end,
       jsonb_build_object('n', i, 'to', 'user' || (i % 5000) || '@example.com'),
       0,
       case when i % 10 = 0 then 'key-' || i end,
       at, at, 5,
       s::queues.task_status,
       case when s = 'pending' and i % 5 = 0 then now() + interval '1 day' else at end,
       case when s = 'pending' then 0 else 1 end,
       case when s <> 'pending' then i end,
       case when s = 'running' then now() + interval '5 minutes' end,
       case when s <> 'pending' then 'worker-' || (i % 8) end,
       case when s in ('failed', 'dead') then 'boom ' || i end,
       case when s <> 'pending' then at + interval '1 second' end,
       case when s = 'completed' then at + interval '2 seconds' end,
       case when s = 'failed' then at + interval '2 seconds' end,
       case when s = 'dead' then at + interval '2 seconds' end,
       case when s = 'cancelled' then at + interval '2 seconds' end
from (
    select i, now() - interval '7 days' + (interval '7 days') * (i::float8 / 1000000) as at,
           case when i > 950000 and i % 5 <> 0 then 'pending'
                when i > 950000 then 'running'
                when i % 200 = 1 then 'failed'
                when i % 200 = 2 then 'dead'
                when i % 33 = 3 then 'cancelled'
                else 'completed' end as s
    from generate_series(1, 1000000) i
) x;
select setval(pg_get_serial_sequence('queues.task', 'task_id'), 1000000);
insert into queues.task_lease (task_lease_id, task_id, worker_id, attempt, leased_at, expires_at)
overriding system value
select task_id, task_id, worker_id, 1, claimed_at, claimed_at + interval '5 minutes' from queues.task where claimed_at is not null;
insert into queues.task_event (task_id, occurred_at, event, from_status, to_status, lease_id, worker_id, attempt)
select task_id, claimed_at, 'claimed', 'pending'::queues.task_status, 'running'::queues.task_status, lease_id, worker_id, 1
from queues.task where claimed_at is not null
union all
select task_id, greatest(completed_at, failed_at, dead_at, cancelled_at),
       case status when 'completed' then 'completed' when 'dead' then 'dead' when 'failed' then 'failed' else 'cancelled' end,
       'running'::queues.task_status, status, lease_id, worker_id, 1
from queues.task where status in ('completed', 'failed', 'dead', 'cancelled');
`

// BenchmarkTasksPage measures the server time of the tasks page (and the other heavy pages)
// over 1,000,000 tasks: ServeHTTP into a recorder, no network. The bar is 200 ms.
//
//	go run ./internal/cmd/withpg -- go test -run '^$' -bench . -benchtime 20x ./dashboard/
func BenchmarkTasksPage(b *testing.B) {
	pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 4})
	start := time.Now()
	_, err := pool.Exec(b.Context(), seedMillionSQL)
	require.NoError(b, err)
	_, err = pool.Exec(b.Context(), `vacuum analyze queues.task, queues.task_lease, queues.task_event`)
	require.NoError(b, err)
	b.Logf("seeded 1,000,000 tasks with their history in %s", time.Since(start).Round(time.Second))

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken})
	require.NoError(b, err)
	pages := []struct{ name, path string }{
		{"newest", "/tasks"},
		{"deep_page", "/tasks?before=500000"},
		{"status_pending", "/tasks?status=pending"},
		{"status_running", "/tasks?status=running"},
		{"status_completed", "/tasks?status=completed"},
		{"status_dead", "/tasks?status=dead"},
		{"status_cancelled_deep", "/tasks?status=cancelled&before=300000"},
		{"type_common", "/tasks?type=email.send"},
		{"type_common_dead", "/tasks?type=email.send&status=dead"},
		{"type_rare", "/tasks?type=rare.type"},
		{"last_hour", "/tasks?from=" + time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")},
		{"old_window", "/tasks?from=" + time.Now().UTC().Add(-6*24*time.Hour).Format("2006-01-02T15:04") +
			"&to=" + time.Now().UTC().Add(-5*24*time.Hour).Format("2006-01-02T15:04")},
		{"idempotency_key", "/tasks?key=key-123450"},
		{"page_500", "/tasks?limit=500"},
		{"dead_page", "/dead"},
		{"task_detail", "/tasks/123456"},
		{"overview", "/"},
		{"queues", "/queues"},
		{"workers", "/workers"},
	}
	var report strings.Builder
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, p.path, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			var total time.Duration
			n := 0
			for b.Loop() {
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				total += time.Since(t0)
				n++
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, rec.Code, rec.Body.String())
				}
			}
			ms := float64(total.Microseconds()) / 1000 / float64(n)
			b.ReportMetric(ms, "ms/page")
			fmt.Fprintf(&report, "%-24s %-48s %8.1f ms\n", p.name, p.path, ms)
		})
	}
	if os.Getenv("TASKORCH_BENCH_REPORT") != "" {
		b.Logf("server time per page over 1,000,000 tasks:\n%s", report.String())
	}
}
