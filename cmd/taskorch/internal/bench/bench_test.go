package bench_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/cmd/taskorch/internal/bench"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// The benchmarks migrate the database they work in themselves: the test databases start empty.
func TestMain(m *testing.M) { dbtest.Main(m, dbtest.Options{}) }

// open prepares a benchmark environment on a fresh test database; it is closed (and checked to
// have cleaned up) when the test ends.
func open(t *testing.T, opts bench.Options) *bench.Env {
	t.Helper()
	if opts.DatabaseURL == "" {
		opts.DatabaseURL = dbtest.NewDBURL(t)
	}
	e, err := bench.Open(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, e.Close(context.WithoutCancel(t.Context())))
		if e.Info.DatabaseCreated {
			given := connect(t, opts.DatabaseURL)
			require.Zero(t, scalar[int](t, given, `select count(*)::int from pg_database where datname = $1`, e.Info.Database),
				"the benchmark's database is dropped")
		}
	})
	return e
}

func connect(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.WithoutCancel(t.Context()), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func scalar[T any](t *testing.T, db taskorch.DBTX, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, db.QueryRow(context.WithoutCancel(t.Context()), sql, args...).Scan(&v))
	return v
}

// asJSON is the result as `taskorch bench --json` prints it.
func asJSON(t *testing.T, r bench.Result) map[string]any {
	t.Helper()
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.NotEmpty(t, r.Table())
	return m
}

func TestThroughput(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	require.True(t, e.Info.DatabaseCreated)
	require.Regexp(t, `^taskorch_bench_[0-9a-f]{8}$`, e.Info.Database)
	for _, method := range []string{"many", "copy"} {
		r, err := bench.Throughput(t.Context(), e, bench.ThroughputConfig{
			Tasks: 1500, Enqueue: method, WorkerOptions: bench.WorkerOptions{Workers: 2, Concurrency: 20},
		})
		require.NoError(t, err)
		require.EqualValues(t, 1500, r.Tasks)
		require.Positive(t, r.TasksPerSecond)
		require.Positive(t, r.EnqueueTasksPerSecond)
		m := asJSON(t, r)
		require.Equal(t, "throughput", m["mode"])
		require.Equal(t, method, m["enqueue"])
		require.InDelta(t, r.TasksPerSecond, m["tasks_per_second"], 0.01)
	}
	require.Equal(t, 3000, scalar[int](t, e.Admin(), `select count(*)::int from queues.task where status = 'completed'`))
	// Full history: a lease per task, and no event (queues.task_history shows the claim and the
	// completion from the lease and the task).
	require.Equal(t, 3000, scalar[int](t, e.Admin(), `select count(*)::int from queues.task_lease`))
	require.Zero(t, scalar[int](t, e.Admin(), `select count(*)::int from queues.task_event`))
	require.Equal(t, 6000, scalar[int](t, e.Admin(), `select count(*)::int from queues.task_history`))
}

func TestThroughputSteady(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Throughput(t.Context(), e, bench.ThroughputConfig{
		Steady: true, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond,
		WorkerOptions: bench.WorkerOptions{Concurrency: 20},
	})
	require.NoError(t, err)
	require.True(t, r.Steady)
	// What the window holds depends on the machine (a starved one can complete none in it); what
	// must hold is that the run measured its window and reported its rate from it.
	require.GreaterOrEqual(t, r.Seconds, 3.0)
	require.GreaterOrEqual(t, r.Tasks, int64(0))
	require.InDelta(t, float64(r.Tasks)/r.Seconds, r.TasksPerSecond, 0.01*float64(r.Tasks)/r.Seconds+1)
}

func TestLatency(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Latency(t.Context(), e, bench.LatencyConfig{Rate: 200, Duration: time.Second, Warmup: 200 * time.Millisecond, Enqueuers: 4})
	require.NoError(t, err)
	require.Equal(t, 200, r.Tasks)
	for _, p := range []bench.Percentiles{r.Start, r.Complete, r.Enqueue, r.DBComplete} {
		require.Positive(t, p.P50)
		require.LessOrEqual(t, p.P50, p.P90)
		require.LessOrEqual(t, p.P90, p.P99)
		require.LessOrEqual(t, p.P99, p.Max)
	}
	// A task is completed after it started, and started after its enqueue began.
	require.Greater(t, r.Complete.P50, r.Start.P50)
	m := asJSON(t, r)
	require.Contains(t, m, "start_ms")
	require.Contains(t, m["complete_ms"], "p99")
	require.Zero(t, r.NotifyCoalesceMS, "the database's default")
}

// The latency bench can coalesce wake-ups for its run, and puts the database's setting back.
func TestLatencyNotifyCoalesce(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	e := open(t, bench.Options{DatabaseURL: url, InPlace: true})
	db := connect(t, url)
	ms := 5
	r, err := bench.Latency(t.Context(), e, bench.LatencyConfig{Rate: 200, Duration: 500 * time.Millisecond,
		Warmup: 100 * time.Millisecond, Enqueuers: 4, NotifyCoalesceMS: &ms})
	require.NoError(t, err)
	require.Equal(t, 100, r.Tasks, "every task ran, woken or polled")
	require.Equal(t, 5, r.NotifyCoalesceMS)
	require.Contains(t, asJSON(t, r), "notify_coalesce_ms")
	require.Equal(t, 0, scalar[int](t, db, `select notify_coalesce_ms from queues.settings`), "put back")
	require.Equal(t, 0, scalar[int](t, db, `select queues.notify_coalesce_ms()`))
	require.True(t, scalar[bool](t, db, `select prosrc like '%queues.settings%' from pg_proc
		where oid = 'queues.notify_coalesce_ms()'::regprocedure`), "set through the settings row: the function is the migration's")

	bad := -1
	_, err = bench.Latency(t.Context(), e, bench.LatencyConfig{Rate: 200, Duration: 100 * time.Millisecond, NotifyCoalesceMS: &bad})
	require.ErrorContains(t, err, "0 ms or more")
}

func TestBacklog(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Backlog(t.Context(), e, bench.BacklogConfig{
		History: 3000, Rounds: 2, Throughput: bench.ThroughputConfig{Tasks: 1000, WorkerOptions: bench.WorkerOptions{Concurrency: 20}},
	})
	require.NoError(t, err)
	require.True(t, r.Paired, "the baseline has a database of its own")
	require.NotNil(t, r.Baseline)
	require.Len(t, r.BaselineRuns, 2)
	require.Len(t, r.BacklogRuns, 2)
	require.Positive(t, r.Ratio)
	require.Positive(t, r.CPURatio)
	require.InDelta(t, r.TasksPerSecond/r.BaselineTasksPerSecond, r.Ratio, 0.001)
	require.Contains(t, r.BacklogRuns, r.TasksPerSecond)
	require.Contains(t, asJSON(t, r), "cpu_ratio")
	// The history looks like the real path's: each finished task under its lease, which
	// queues.task_history shows as its claim and its completion.
	require.Equal(t, 5000, scalar[int](t, e.Admin(), `select count(*)::int from queues.task where status = 'completed'`))
	require.Equal(t, 3000, scalar[int](t, e.Admin(), `select count(*)::int from queues.task t
		join queues.task_lease l on l.task_lease_id = t.lease_id and l.task_id = t.task_id where t.worker_id = 'bench-history'`))
	require.Equal(t, 6000, scalar[int](t, e.Admin(), `select count(*)::int from queues.task_history h
		join queues.task t using (task_id) where t.worker_id = 'bench-history' and h.lease_id = t.lease_id`))
	// Later leases do not collide with the history's.
	require.Equal(t, 5000, scalar[int](t, e.Admin(), `select count(distinct task_lease_id)::int from queues.task_lease`))
	// The history sits in its day partitions, as a leader keeps them, not in the defaults.
	require.Zero(t, scalar[int](t, e.Admin(), `select count(*)::int from queues.task_lease_default`))
	require.Zero(t, scalar[int](t, e.Admin(), `select count(*)::int from queues.task_event_default`))
}

func TestProcesses(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{Processes: []string{"comms"}})
	r, err := bench.Processes(t.Context(), e, bench.ProcessesConfig{Count: 40, WorkerOptions: bench.WorkerOptions{Concurrency: 8}})
	require.NoError(t, err)
	require.EqualValues(t, 40, r.Succeeded)
	require.Zero(t, r.Failed)
	require.EqualValues(t, 40, r.OutboxMessages)
	require.EqualValues(t, 40, r.EmailTasks)
	// The supervisor runs as ticks, each advancing every due send: a few runs, not one per send.
	require.Positive(t, r.SupervisorRuns)
	require.Less(t, r.SupervisorRuns, int64(10))
	require.Positive(t, r.ProcessesPerSecond)
	require.Contains(t, asJSON(t, r), "processes_per_second")
}

// The processes mode needs the comms set.
func TestProcessesNeedsComms(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	_, err := bench.Processes(t.Context(), e, bench.ProcessesConfig{Count: 1})
	require.ErrorContains(t, err, "comms process set is not installed")
}

// In place, the benchmark works in the given database and deletes only what it added; it
// refuses a database where tasks are waiting.
func TestInPlace(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBURL(t)
	db := connect(t, url)
	{
		e, err := bench.Open(t.Context(), bench.Options{DatabaseURL: url, InPlace: true, Processes: []string{"comms"}})
		require.NoError(t, err)
		require.False(t, e.Info.DatabaseCreated)
		require.NoError(t, e.Close(t.Context()))
	}
	// The application's own rows: a finished task, a sent email.
	_, err := db.Exec(t.Context(), `select queues.enqueue('app_task', '{}')`)
	require.NoError(t, err)
	_, err = db.Exec(t.Context(), `select queues.complete_task(t.task_id) from queues.dequeue_next_available_task() t`)
	require.NoError(t, err)
	_, err = db.Exec(t.Context(), `update comms.process_config set check_interval = '42 seconds' where process = 'send_email'`)
	require.NoError(t, err)
	require.Equal(t, 1, scalar[int](t, db, `select count(*)::int from queues.task where status = 'completed'`))

	e := open(t, bench.Options{DatabaseURL: url, InPlace: true, Processes: []string{"comms"}})
	_, err = bench.Throughput(t.Context(), e, bench.ThroughputConfig{Tasks: 300, WorkerOptions: bench.WorkerOptions{Concurrency: 10}})
	require.NoError(t, err)
	_, err = bench.Processes(t.Context(), e, bench.ProcessesConfig{Count: 5, WorkerOptions: bench.WorkerOptions{Concurrency: 4}})
	require.NoError(t, err)
	b, err := bench.Backlog(t.Context(), e, bench.BacklogConfig{History: 500, Rounds: 1,
		Throughput: bench.ThroughputConfig{Tasks: 200, WorkerOptions: bench.WorkerOptions{Concurrency: 10}}})
	require.NoError(t, err)
	require.False(t, b.Paired, "in place, the baseline runs before the history")
	require.Positive(t, b.Ratio)
	require.Greater(t, scalar[int](t, db, `select count(*)::int from queues.task`), 300)
	require.NoError(t, e.Close(t.Context()))

	require.Equal(t, []string{"app_task"}, scalar[[]string](t, db, `select array_agg(task_type) from queues.task`))
	require.Equal(t, 1, scalar[int](t, db, `select count(*)::int from queues.task_lease`))
	require.Zero(t, scalar[int](t, db, `select count(*)::int from comms.message`))
	require.Zero(t, scalar[int](t, db, `select count(*)::int from queues.outbox_message`))
	require.Equal(t, "00:00:42", scalar[string](t, db, `select check_interval::text from comms.process_config where process = 'send_email'`))

	// A pending task: the benchmark's workers would run it.
	_, err = db.Exec(t.Context(), `select queues.enqueue('app_task', '{}')`)
	require.NoError(t, err)
	_, err = bench.Open(t.Context(), bench.Options{DatabaseURL: url, InPlace: true})
	require.ErrorContains(t, err, "1 task(s) are pending or running in this database")
}

// The slots mode works a backlog with handlers that sleep, and its utilisation is what the
// figures say: tasks × work ÷ (wall time × slots).
func TestSlots(t *testing.T) {
	t.Parallel()
	e := open(t, bench.Options{})
	r, err := bench.Slots(t.Context(), e, bench.SlotsConfig{Tasks: 400, Work: 2 * time.Millisecond,
		WorkerOptions: bench.WorkerOptions{Concurrency: 8}})
	require.NoError(t, err)
	require.EqualValues(t, 400, r.Tasks)
	require.Equal(t, "sleep", r.Handler)
	require.InDelta(t, 2.0, r.WorkMS, 0.001)
	require.InDelta(t, 400*0.002/(r.Seconds*8), r.Utilisation, 0.002)
	require.Greater(t, r.Utilisation, 0.0)
	require.LessOrEqual(t, r.Utilisation, 1.0)
	require.GreaterOrEqual(t, r.HandlerUtilisation, r.Utilisation-0.002, "a sleep lasts at least its duration")
	// Idle per task is the slot time outside handlers, per task (the figures are rounded).
	require.InDelta(t, r.Seconds*8*1000/400*(1-r.HandlerUtilisation), r.IdleMSPerTask, 0.05)
	// 400 tasks of 2 ms on 8 slots cannot take less than 100 ms.
	require.GreaterOrEqual(t, r.Seconds, 0.1)
	require.Equal(t, 400, scalar[int](t, e.Admin(), `select count(*)::int from queues.task where status = 'completed'`))
	// The steady window (the 40th to the 360th task) cannot beat the slots either: 8 slots of
	// 2 ms finish at most 4,000 tasks a second.
	require.Greater(t, r.SteadyUtilisation, 0.0)
	require.LessOrEqual(t, r.SteadyUtilisation, 1.0)
	require.LessOrEqual(t, r.SteadyTasksPerSecond, 4000.0*1.01)
	require.InDelta(t, r.SteadyTasksPerSecond*0.002/8, r.SteadyUtilisation, 0.002)
	m := asJSON(t, r)
	require.Equal(t, "slots", m["mode"])
	require.InDelta(t, r.Utilisation, m["utilisation"], 0.0001)
	require.InDelta(t, r.SteadyUtilisation, m["steady_utilisation"], 0.0001)

	_, err = bench.Slots(t.Context(), e, bench.SlotsConfig{Work: -time.Millisecond})
	require.ErrorContains(t, err, "--work must be between 0 and 1m")
}
