package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// The app-tx mode does what `taskorch bench app-tx` does (cmd/taskorch/internal/bench/apptx.go in taskorch):
// Connections connections each commit transactions in a loop that insert one row into an
// application table (an order) and, on the insert side, insert one job with Client.InsertTx;
// the baseline side inserts the row alone. The sides alternate for Rounds rounds; transactions
// per second, the medians and their ratio, under the same JSON keys.

// appTxSide is one side of the app-tx mode.
type appTxSide struct {
	TxPerSecond   float64   `json:"tx_per_second"`
	Runs          []float64 `json:"runs"`
	CPU           cpuCost   `json:"cpu_per_tx"`
	Notifications int64     `json:"notifications"`
}

// appTxResult is the app-tx mode's result.
type appTxResult struct {
	Mode              string    `json:"mode"`
	System            string    `json:"system"`
	RiverVersion      string    `json:"river_version"`
	PgxVersion        string    `json:"pgx_version"`
	Database          string    `json:"database"`
	DatabaseCreated   bool      `json:"database_created"`
	Kept              bool      `json:"kept,omitempty"`
	ServerVersion     string    `json:"server_version"`
	Fsync             string    `json:"fsync"`
	SynchronousCommit string    `json:"synchronous_commit"`
	FullPageWrites    string    `json:"full_page_writes"`
	SharedBuffers     string    `json:"shared_buffers"`
	StartedAt         time.Time `json:"started_at"`
	CPUs              int       `json:"cpus"`
	LoadBefore        []float64 `json:"load_average_before,omitempty"`
	LoadAfter         []float64 `json:"load_average_after,omitempty"`

	Connections     int     `json:"connections"`
	DurationSeconds float64 `json:"duration_seconds"`
	WarmupSeconds   float64 `json:"warmup_seconds"`
	Rounds          int     `json:"rounds"`
	// Workers is 1 when a started client works the jobs as they come (--work), else 0.
	Workers         int     `json:"workers"`
	Concurrency     int     `json:"concurrency,omitempty"`
	FetchCooldownMS float64 `json:"fetch_cooldown_ms"`

	Order              appTxSide `json:"order_only"`
	Enqueue            appTxSide `json:"enqueue"`
	OrderTxPerSecond   float64   `json:"order_tx_per_second"`
	EnqueueTxPerSecond float64   `json:"enqueue_tx_per_second"`
	Ratio              float64   `json:"ratio"`
	Tasks              int64     `json:"tasks"`
}

// appTxArgs is the job the app-tx mode inserts: the order's id.
type appTxArgs struct {
	OrderID int64 `json:"order_id"`
}

// Kind implements river.JobArgs.
func (appTxArgs) Kind() string { return "riverbench_app_tx" }

type appTxWorker struct {
	river.WorkerDefaults[appTxArgs]
}

// Work implements river.Worker.
func (appTxWorker) Work(context.Context, *river.Job[appTxArgs]) error { return nil }

// measureAppTx runs the app-tx mode in the migrated database pool is on.
func measureAppTx(ctx context.Context, c config, pool *pgxpool.Pool, r *appTxResult, log io.Writer) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &appTxWorker{})
	rc := &river.Config{
		FetchCooldown: c.AppFetchCooldown,
		Logger:        slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Workers:       workers,
	}
	if c.Work {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.Concurrency}}
		r.Workers, r.Concurrency = 1, c.Concurrency
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return err
	}
	if c.Work {
		if err := client.Start(ctx); err != nil {
			return fmt.Errorf("start: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = client.Stop(sctx)
		}()
	}
	if _, err := pool.Exec(ctx, `create table bench_order (
		id bigint generated always as identity primary key,
		customer text not null,
		amount numeric(12, 2) not null,
		created_at timestamptz not null default now())`); err != nil {
		return fmt.Errorf("create the application's table: %w", err)
	}
	heard, stopListen, err := countNotifications(ctx, pool)
	if err != nil {
		return err
	}
	defer stopListen()
	if _, err := pool.Exec(ctx, "checkpoint"); err != nil {
		fmt.Fprintln(log, "riverbench: no checkpoint before the run:", err)
	}

	const insert = `insert into bench_order (customer, amount) values ($1, $2) returning id`
	order := func(ctx context.Context, tx pgx.Tx, i int64) error {
		var id int64
		return tx.QueryRow(ctx, insert, "customer", i%1000).Scan(&id)
	}
	enqueue := func(ctx context.Context, tx pgx.Tx, i int64) error {
		var id int64
		if err := tx.QueryRow(ctx, insert, "customer", i%1000).Scan(&id); err != nil {
			return err
		}
		_, err := client.InsertTx(ctx, tx, appTxArgs{OrderID: id}, nil)
		return err
	}
	postmaster := findPostmaster(ctx, pool)
	var orderCPU, enqueueCPU cpuSpan
	for round := 1; round <= c.Rounds; round++ {
		sides := []string{"order", "enqueue"}
		if round%2 == 0 {
			slices.Reverse(sides)
		}
		for _, s := range sides {
			if s == "order" {
				run, err := appTxRun(ctx, c, pool, postmaster, heard, order)
				if err != nil {
					return err
				}
				r.Order.Runs = append(r.Order.Runs, run.rate)
				r.Order.Notifications += run.notifications
				orderCPU.add(run)
			} else {
				run, err := appTxRun(ctx, c, pool, postmaster, heard, enqueue)
				if err != nil {
					return err
				}
				r.Enqueue.Runs = append(r.Enqueue.Runs, run.rate)
				r.Enqueue.Notifications += run.notifications
				r.Tasks += run.total
				enqueueCPU.add(run)
			}
		}
	}
	r.Order.TxPerSecond, r.Enqueue.TxPerSecond = medianOf(r.Order.Runs), medianOf(r.Enqueue.Runs)
	r.Order.CPU, r.Enqueue.CPU = orderCPU.cost(), enqueueCPU.cost()
	r.OrderTxPerSecond, r.EnqueueTxPerSecond = r.Order.TxPerSecond, r.Enqueue.TxPerSecond
	if r.Order.TxPerSecond > 0 {
		r.Ratio = round3(r.Enqueue.TxPerSecond / r.Order.TxPerSecond)
	}
	var jobs int64
	if err := pool.QueryRow(ctx, `select count(*) from river_job where kind = $1`, appTxArgs{}.Kind()).Scan(&jobs); err != nil {
		return err
	}
	if jobs != r.Tasks {
		return fmt.Errorf("%d transactions inserted a job and committed, but river_job holds %d", r.Tasks, jobs)
	}
	return nil
}

type appTxRunResult struct {
	rate          float64
	total         int64
	measured      int64
	notifications int64
	cpu0, cpu1    cpuSample
}

type cpuSpan struct {
	a, b cpuSample
	n    int64
}

func (s *cpuSpan) add(r appTxRunResult) {
	s.a.client += r.cpu0.client
	s.b.client += r.cpu1.client
	if r.cpu0.server > 0 && r.cpu1.server > 0 {
		s.a.server += r.cpu0.server
		s.b.server += r.cpu1.server
	}
	s.n += r.measured
}

func (s *cpuSpan) cost() cpuCost { return costOf(s.a, s.b, s.n, runtime.NumCPU()) }

// appTxRun runs tx on c.Connections connections, each in a loop, for the warm-up and the
// measured window, and counts what committed in the window. The transactions run on ctx, never
// cancelled by the end of the run (a commit cut short may have committed): each connection
// stops between two transactions.
func appTxRun(ctx context.Context, c config, pool *pgxpool.Pool, postmaster int, heard *atomic.Int64,
	tx func(context.Context, pgx.Tx, int64) error) (appTxRunResult, error) {
	var run appTxRunResult
	var committed, seq atomic.Int64
	var stopped atomic.Bool
	failed := make(chan struct{})
	errc := make(chan error, c.Connections)
	var wg sync.WaitGroup
	for range c.Connections {
		wg.Go(func() {
			for !stopped.Load() {
				err := pgx.BeginFunc(ctx, pool, func(t pgx.Tx) error { return tx(ctx, t, seq.Add(1)) })
				if err != nil {
					errc <- err
					if stopped.CompareAndSwap(false, true) {
						close(failed)
					}
					return
				}
				committed.Add(1)
			}
		})
	}
	wait := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-failed:
			return nil
		case <-time.After(d):
			return nil
		}
	}
	err := wait(c.Warmup)
	c0, n0, h0, t0 := cpuNow(postmaster), committed.Load(), heard.Load(), time.Now()
	if err == nil {
		err = wait(c.Duration)
	}
	c1, n1, h1, took := cpuNow(postmaster), committed.Load(), heard.Load(), time.Since(t0)
	stopped.Store(true)
	wg.Wait()
	close(errc)
	if first := <-errc; first != nil {
		return run, fmt.Errorf("a transaction failed: %w", first)
	}
	if err != nil {
		return run, err
	}
	run.total, run.measured, run.notifications = committed.Load(), n1-n0, h1-h0
	run.rate, run.cpu0, run.cpu1 = rate(n1-n0, took), c0, c1
	return run, nil
}

// countNotifications listens on River's insert topic (its jobs' wake-ups: the channel
// "<schema>.river_insert") on a connection of its own and counts what it hears until stop.
func countNotifications(ctx context.Context, pool *pgxpool.Pool) (*atomic.Int64, func(), error) {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	if _, err := conn.Exec(ctx, `listen "public.river_insert"`); err != nil {
		_ = conn.Close(ctx)
		return nil, nil, err
	}
	var n atomic.Int64
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := conn.WaitForNotification(lctx); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return &n, func() {
		cancel()
		<-done
		_ = conn.Close(context.WithoutCancel(ctx))
	}, nil
}

func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// rows is the table of an app-tx result.
func (r *appTxResult) rows() [][2]string {
	side := func(s appTxSide) string {
		return fmt.Sprintf("%.0f tx/s (median of %v), %.1f µs client + %.1f µs server a transaction; %d insert notifications heard",
			s.TxPerSecond, s.Runs, s.CPU.Client, s.CPU.Server, s.Notifications)
	}
	work := "none (the jobs wait in the queue)"
	if r.Workers > 0 {
		work = fmt.Sprintf("one started client, MaxWorkers %d, working the jobs as they come", r.Concurrency)
	}
	return [][2]string{
		{"system", fmt.Sprintf("River %s (pgx %s)", r.RiverVersion, r.PgxVersion)},
		{"database", r.Database + " (created for the run)"},
		{"server", fmt.Sprintf("PostgreSQL %s, fsync=%s, synchronous_commit=%s, full_page_writes=%s, shared_buffers=%s",
			r.ServerVersion, r.Fsync, r.SynchronousCommit, r.FullPageWrites, r.SharedBuffers)},
		{"machine", fmt.Sprintf("%d CPUs, load average %v before, %v after", r.CPUs, r.LoadBefore, r.LoadAfter)},
		{"transactions", fmt.Sprintf("%d connections, each in a loop; %d rounds of %.0f s measured after %.0f s, the sides alternating",
			r.Connections, r.Rounds, r.DurationSeconds, r.WarmupSeconds)},
		{"workers", work},
		{"client", fmt.Sprintf("FetchCooldown %v ms (it spaces the insert notifications)", r.FetchCooldownMS)},
		{"order row only", side(r.Order)},
		{"order row + InsertTx", side(r.Enqueue)},
		{"ratio", fmt.Sprintf("%.2f of the order rows alone", r.Ratio)},
	}
}
