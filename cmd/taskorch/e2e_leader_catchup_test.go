package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// A killed leader, and no worker at all for a few seconds: the next leader enqueues every tick
// of an @every 1s schedule that was missed meanwhile (the catch-up window, a minute, covers
// them), each once, oldest first, counting them late in its metrics and its log. From the first
// tick to the last there is no gap: a handover loses no tick (docs/operations.md, "Periodic
// schedules").
func TestE2EKilledLeaderLosesNoTick(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	pool := openPool(t, url)
	r := run(t, "schedules", "add", "every-second", "@every 1s", "taskorch.noop", `{"from": "catch-up"}`, "--database-url", url)
	require.Equal(t, 0, r.code, r.err)

	a := startWorkerProc(t, url, append(fastMaintenance, "TASKORCH_WORKER_ID=a")...)
	waitFor(t, pool, "ticks before the crash", `select count(*) >= 2 from queues.task where payload->>'from' = 'catch-up'`)
	a.signal(t, syscall.SIGKILL)
	a.wait(t)
	waitFor(t, pool, "ticks missed for 4 seconds", `select next_run_at < now() - interval '4 seconds' from queues.schedule where name = 'every-second'`)
	missedFrom := q[time.Time](t, pool, `select next_run_at from queues.schedule where name = 'every-second'`)

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	b := startWorkerProc(t, url, append(fastMaintenance, "TASKORCH_WORKER_ID=b", "TASKORCH_HTTP_ADDR="+addr)...)
	waitFor(t, pool, "b caught up", `select next_run_at > now() and last_tick_at > $1::timestamptz + interval '4 seconds' from queues.schedule where name = 'every-second'`, missedFrom)
	requireTicksContiguous(t, pool, "catch-up", time.Second)
	require.True(t, q[bool](t, pool, `select exists (select from queues.task where payload->>'from' = 'catch-up' and scheduled_at = $1)`, missedFrom),
		"the first missed tick was enqueued")

	// Those at least ScheduleLateAfter (3 s) late count as late, in the metric and the log.
	lateLine := regexp.MustCompile(`(?m)^taskorch_schedule_ticks_missed_total\{reason="late"\} (\d+)$`)
	require.Eventually(t, func() bool {
		code, body := get("http://" + addr + "/metrics")
		m := lateLine.FindStringSubmatch(body)
		if code != http.StatusOK || m == nil {
			return false
		}
		n, _ := strconv.Atoi(m[1])
		return n >= 2
	}, 30*time.Second, 20*time.Millisecond, "late ticks counted")
	_, body := get("http://" + addr + "/metrics")
	require.Contains(t, body, `taskorch_schedule_ticks_missed_total{reason="skipped"} 0`, "none older than the window")
	select {
	case <-b.out.lineWith(`schedule ticks enqueued late`, `"schedule":"every-second"`):
	case <-time.After(30 * time.Second):
		t.Fatalf("no log line about the late ticks:\n%s", b.out.String())
	}
}

// requireTicksContiguous checks that every tick of the schedule whose tasks carry {"from": from},
// from its first tick to its last, was enqueued exactly once: no gap, no duplicate.
func requireTicksContiguous(t *testing.T, pool *pgxpool.Pool, from string, every time.Duration) {
	t.Helper()
	rows, err := pool.Query(t.Context(), `select scheduled_at from queues.task where payload->>'from' = $1 order by scheduled_at`, from)
	require.NoError(t, err)
	defer rows.Close()
	var ticks []time.Time
	for rows.Next() {
		var at time.Time
		require.NoError(t, rows.Scan(&at))
		ticks = append(ticks, at)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, ticks)
	for i := 1; i < len(ticks); i++ {
		require.Equal(t, every, ticks[i].Sub(ticks[i-1]), "ticks %s and %s: a gap or a duplicate (%d ticks)", ticks[i-1], ticks[i], len(ticks))
	}
	require.Equal(t, int64(len(ticks)), q[int64](t, pool, `select count(distinct idempotency_key) from queues.task where payload->>'from' = $1`, from))
}
