package prometheus_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	taskorchprom "github.com/taskorch/taskorch/contrib/prometheus"
)

// The queue gauges on the metrics endpoint carry each SQL function as a queue of its own,
// task_type="db_function:<schema.function>", never the bare db_function while every task names
// its function: the depth, the pause (its own, and db_function's, which holds every function),
// and unserved 0 since any worker claims db_function. The per-task counters stay per task type.
func TestQueueGaugesPerFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	mustExec(t, pool, `create schema billing; create schema reports;
		create function billing.recalc(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
		create function reports.daily(jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;`)
	_, err := c.PauseQueue(ctx, "db_function:billing.recalc", "ops")
	require.NoError(t, err)
	mustExec(t, pool, `select queues.enqueue('db_function', '{"db_function": "billing.recalc"}') from generate_series(1, 2)`)
	mustExec(t, pool, `select queues.enqueue('db_function', '{"db_function": "reports.daily"}', now() + interval '1 hour')`)

	reg := prometheus.NewRegistry()
	startWorker(t, pool, &taskorch.WorkerConfig{Observers: []taskorch.Observer{taskorchprom.New(reg)}, QueueStatsInterval: 20 * time.Millisecond})
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	scrape := func() string {
		resp, err := http.Get(srv.URL)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	waitFor := func(lines ...string) string {
		t.Helper()
		var body string
		require.Eventually(t, func() bool {
			body = scrape()
			for _, l := range lines {
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(l) + `$`).MatchString(body) {
					return false
				}
			}
			return true
		}, 20*time.Second, 10*time.Millisecond, "never scraped %q", lines)
		return body
	}

	body := waitFor(
		`taskorch_queue_depth{status="pending",task_type="db_function:billing.recalc"} 2`,
		`taskorch_queue_depth{status="pending",task_type="db_function:reports.daily"} 1`,
		`taskorch_queue_paused{task_type="db_function:billing.recalc"} 1`,
		`taskorch_queue_paused{task_type="db_function:reports.daily"} 0`,
		`taskorch_queue_unserved{task_type="db_function:billing.recalc"} 0`,
	)
	require.Positive(t, len(regexp.MustCompile(`(?m)^taskorch_oldest_pending_age_seconds\{task_type="db_function:billing\.recalc"\} `).FindAllString(body, -1)))
	require.NotRegexp(t, `taskorch_queue_(depth|unserved)\{[^}]*task_type="db_function"`, body, "every task names its function")
	// The per-task counters stay per task type.
	require.Contains(t, body, `taskorch_tasks_failed_total{outcome="dead",task_type="db_function"} 0`)
	require.NotRegexp(t, `taskorch_tasks_[a-z_]+\{[^}]*task_type="db_function:`, body)

	// Pausing db_function holds every function: each function's queue says so.
	_, err = c.PauseQueue(ctx, "db_function", "ops")
	require.NoError(t, err)
	waitFor(
		`taskorch_queue_paused{task_type="db_function"} 1`,
		`taskorch_queue_paused{task_type="db_function:reports.daily"} 1`,
		`taskorch_queue_paused{task_type="db_function:billing.recalc"} 1`,
	)
}
