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

// BenchmarkWorkflowPages measures the server time of the workflow pages against the tasks page
// in the same run (ServeHTTP into a recorder, no network), over 2,000 diamond workflows (1 → 2
// → 1: 8,000 tasks) and one fan-out and fan-in of 5,000 tasks (root → 4,998 → join), whose page
// draws 1,000 nodes.
//
//	go run ./internal/cmd/withpg -- sh -c 'TASKORCH_BENCH_REPORT=1 go test -run "^$" -bench WorkflowPages -benchtime 20x ./dashboard/'
func BenchmarkWorkflowPages(b *testing.B) {
	pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 4})
	ctx := b.Context()
	start := time.Now()
	var big, diamond int64
	require.NoError(b, pool.QueryRow(ctx, `select queues.enqueue('fan.root', '{}')`).Scan(&big))
	_, err := pool.Exec(ctx, `select queues.enqueue('fan.join', '{}', _after => (
		select queues.enqueue_many(array_fill('fan.leaf'::text, array[4998]),
			array(select jsonb_build_object('i', i) from generate_series(1, 4998) i), _after => array[$1::bigint])))`, big)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `do $$
		declare _a bigint; _bc bigint[];
		begin
			for i in 1..2000 loop
				_a := queues.enqueue('order.charge', jsonb_build_object('order', i));
				_bc := queues.enqueue_many(array['order.reserve', 'order.receipt'],
					array[jsonb_build_object('order', i), jsonb_build_object('order', i)], _after => array[_a]);
				perform queues.enqueue('order.ship', jsonb_build_object('order', i), _after => _bc);
			end loop;
		end $$`)
	require.NoError(b, err)
	require.NoError(b, pool.QueryRow(ctx, `select max(workflow_id) from queues.task`).Scan(&diamond))
	_, err = pool.Exec(ctx, `vacuum analyze queues.task, queues.workflow_task`)
	require.NoError(b, err)
	b.Logf("seeded 2,000 diamonds and a workflow of 5,000 tasks in %s", time.Since(start).Round(time.Second))

	h, err := dashboard.New(pool, dashboard.Config{Token: testToken})
	require.NoError(b, err)
	pages := []struct{ name, path, want string }{
		{"tasks_baseline", "/tasks", "data-task-id="},
		{"workflows", "/workflows", "data-workflow-id="},
		{"workflows_deep", fmt.Sprintf("/workflows?before=%d", big+2000), "data-workflow-id="},
		{"workflow_diamond", fmt.Sprintf("/workflows/%d", diamond), `data-layer="2"`},
		{"workflow_5000_capped", fmt.Sprintf("/workflows/%d", big), `id="graph-capped"`},
	}
	ms := map[string]float64{}
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
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), p.want) {
					b.Fatalf("%s: %d, no %q", p.path, rec.Code, p.want)
				}
			}
			ms[p.name] = float64(total.Microseconds()) / 1000 / float64(n)
			b.ReportMetric(ms[p.name], "ms/page")
			fmt.Fprintf(&report, "%-22s %-28s %8.1f ms  %5.2fx the tasks page\n", p.name, p.path, ms[p.name], ms[p.name]/ms["tasks_baseline"])
		})
	}
	if os.Getenv("TASKORCH_BENCH_REPORT") != "" {
		b.Logf("server time per page:\n%s", report.String())
	}
}
