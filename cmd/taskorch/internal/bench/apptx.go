package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/humanize"
)

// AppTxConfig configures AppTx.
type AppTxConfig struct {
	// Connections is how many connections run transactions at once, each in a loop. Defaults
	// to 32.
	Connections int
	// Duration is how long each run is measured. Defaults to 10s.
	Duration time.Duration
	// Warmup is how long each run goes before it is measured. Defaults to 2s.
	Warmup time.Duration
	// Rounds is how many runs each side gets; the sides alternate (the order rows alone first in
	// odd rounds), and the medians are reported. Defaults to 3.
	Rounds int
	// Workers is how many in-process workers (no-op handlers, Concurrency slots each) run through
	// both sides, working the tasks as they come; 0 (the default) runs none, as an application
	// that enqueues for workers elsewhere, or later.
	Workers int
	// Concurrency is each worker's number of slots. Defaults to 100.
	Concurrency int
}

func (c AppTxConfig) withDefaults() AppTxConfig {
	if c.Connections <= 0 {
		c.Connections = 32
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	} else if c.Warmup == 0 {
		c.Warmup = 2 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.Workers < 0 {
		c.Workers = 0
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 100
	}
	return c
}

// AppTxSide is one side of AppTx: its runs and their median.
type AppTxSide struct {
	// TxPerSecond is the median of Runs: transactions committed per second.
	TxPerSecond float64   `json:"tx_per_second"`
	Runs        []float64 `json:"runs"`
	// CPU is the CPU each transaction cost, over all the side's runs (measured windows only).
	CPU CPUCost `json:"cpu_per_tx"`
	// Notifications counts NOTIFY taskorch_task heard during the side's measured windows.
	Notifications int64 `json:"notifications"`
}

// AppTxResult is AppTx's result.
type AppTxResult struct {
	Header
	Connections     int     `json:"connections"`
	DurationSeconds float64 `json:"duration_seconds"`
	WarmupSeconds   float64 `json:"warmup_seconds"`
	Rounds          int     `json:"rounds"`
	Workers         int     `json:"workers"`
	Concurrency     int     `json:"concurrency,omitempty"`
	// Order is the baseline: each transaction inserts one row into the application's table.
	Order AppTxSide `json:"order_only"`
	// Enqueue: each transaction inserts the same row and enqueues one task (Client.EnqueueTx).
	Enqueue AppTxSide `json:"enqueue"`
	// OrderTxPerSecond, EnqueueTxPerSecond and Ratio (enqueue ÷ order) repeat the medians, under
	// the keys riverbench's app-tx mode uses too (scripts/bench-peers.sh reads them).
	OrderTxPerSecond   float64 `json:"order_tx_per_second"`
	EnqueueTxPerSecond float64 `json:"enqueue_tx_per_second"`
	Ratio              float64 `json:"ratio"`
	// Tasks is how many tasks the enqueue side committed, warm-ups included.
	Tasks int64 `json:"tasks"`
}

// Table implements Result.
func (r *AppTxResult) Table() []Row {
	side := func(s AppTxSide) string {
		runs := make([]string, len(s.Runs))
		for i, v := range s.Runs {
			runs[i] = humanize.Thousands(int64(v))
		}
		return fmt.Sprintf("%s tx/s (median of %v), %s; %d NOTIFY heard", humanize.Thousands(int64(s.TxPerSecond)), runs, s.CPU, s.Notifications)
	}
	workers := "none (the tasks wait in the queue)"
	if r.Workers > 0 {
		workers = fmt.Sprintf("%d in-process, concurrency %d each, working the tasks as they come", r.Workers, r.Concurrency)
	}
	return append(r.headerRows(),
		Row{"transactions", fmt.Sprintf("%d connections, each in a loop; %d rounds of %.0f s measured after %.0f s, the sides alternating",
			r.Connections, r.Rounds, r.DurationSeconds, r.WarmupSeconds)},
		Row{"workers", workers},
		Row{"order row only", side(r.Order)},
		Row{"order row + EnqueueTx", side(r.Enqueue)},
		Row{"ratio", fmt.Sprintf("%.2f of the order rows alone", r.Ratio)},
	)
}

// AppTxArgs is the task AppTx enqueues: the order's id.
type AppTxArgs struct {
	OrderID int64 `json:"order_id"`
}

const appTxType = "taskorch.bench.app_tx"

// TaskType implements taskorch.TaskArgs.
func (AppTxArgs) TaskType() string { return appTxType }

// AppTx measures what enqueueing a task costs an application that enqueues in its own
// transactions: Connections connections each commit transactions in a loop that insert one
// row into an application table (an order) and, on the enqueue side, enqueue one task with
// Client.EnqueueTx; the baseline side inserts the row alone. The sides alternate for Rounds
// rounds in the same database; transactions committed per second, the medians and their ratio.
func AppTx(ctx context.Context, e *Env, cfg AppTxConfig) (*AppTxResult, error) {
	cfg = cfg.withDefaults()
	r := &AppTxResult{Header: e.header("app-tx"), Connections: cfg.Connections, DurationSeconds: cfg.Duration.Seconds(),
		WarmupSeconds: cfg.Warmup.Seconds(), Rounds: cfg.Rounds, Workers: cfg.Workers}
	table := pgx.Identifier{"taskorch_bench_order_" + randomHex(3)}.Sanitize()
	if _, err := e.admin.Exec(ctx, `create table `+table+` (
		id bigint generated always as identity primary key,
		customer text not null,
		amount numeric(12, 2) not null,
		created_at timestamptz not null default now())`); err != nil {
		return nil, fmt.Errorf("bench: create the application's table: %w", err)
	}
	if !e.keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if _, err := e.admin.Exec(dctx, `drop table if exists `+table); err != nil {
				e.log.Warn("bench: could not drop the application's table", "table", table, "error", err)
			}
		}()
	}
	pool, err := e.NewPool(ctx, int32(cfg.Connections), nil) //nolint:gosec // a flag's count
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	client, err := taskorch.NewClient(pool, nil)
	if err != nil {
		return nil, err
	}
	if cfg.Workers > 0 {
		r.Concurrency = cfg.Concurrency
		o := WorkerOptions{Workers: cfg.Workers, Concurrency: cfg.Concurrency}
		wpool, err := e.workerPool(ctx, o, 0)
		if err != nil {
			return nil, err
		}
		defer wpool.Close()
		hs := taskorch.NewHandlers()
		taskorch.AddHandler(hs, func(context.Context, *taskorch.TaskFor[AppTxArgs]) error { return nil })
		g, err := e.startWorkers(ctx, wpool, o, taskorch.WorkerConfig{Handlers: hs})
		if err != nil {
			return nil, err
		}
		defer g.stop()
	}
	mark, err := e.taskMark(ctx)
	if err != nil {
		return nil, err
	}
	heard, stopListen, err := e.countNotifications(ctx)
	if err != nil {
		return nil, err
	}
	defer stopListen()
	e.checkpoint(ctx)

	insert := `insert into ` + table + ` (customer, amount) values ($1, $2) returning id`
	order := func(ctx context.Context, tx pgx.Tx, i int64) error {
		var id int64
		return tx.QueryRow(ctx, insert, "customer", i%1000).Scan(&id)
	}
	enqueue := func(ctx context.Context, tx pgx.Tx, i int64) error {
		var id int64
		if err := tx.QueryRow(ctx, insert, "customer", i%1000).Scan(&id); err != nil {
			return err
		}
		_, err := client.EnqueueTx(ctx, tx, AppTxArgs{OrderID: id}, nil)
		return err
	}
	var orderCPU, enqueueCPU cpuSpan
	for round := 1; round <= cfg.Rounds; round++ {
		sides := []string{"order", "enqueue"}
		if round%2 == 0 {
			slices.Reverse(sides)
		}
		for _, s := range sides {
			e.progress.phase("app-tx: round %d of %d, %s", round, cfg.Rounds, s)
			var run appTxRun
			if s == "order" {
				run, err = e.appTxRun(ctx, pool, cfg, heard, order)
				r.Order.Runs = append(r.Order.Runs, run.rate)
				r.Order.Notifications += run.notifications
				orderCPU.add(run)
			} else {
				run, err = e.appTxRun(ctx, pool, cfg, heard, enqueue)
				r.Enqueue.Runs = append(r.Enqueue.Runs, run.rate)
				r.Enqueue.Notifications += run.notifications
				r.Tasks += run.total
				enqueueCPU.add(run)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	r.Order.TxPerSecond, r.Enqueue.TxPerSecond = medianOf(r.Order.Runs), medianOf(r.Enqueue.Runs)
	r.Order.CPU, r.Enqueue.CPU = orderCPU.cost(), enqueueCPU.cost()
	r.OrderTxPerSecond, r.EnqueueTxPerSecond = r.Order.TxPerSecond, r.Enqueue.TxPerSecond
	if r.Order.TxPerSecond > 0 {
		r.Ratio = round3(r.Enqueue.TxPerSecond / r.Order.TxPerSecond)
	}
	var tasks int64
	if err := e.admin.QueryRow(ctx, `select count(*) from queues.task where task_id > $1 and task_type = $2`, mark, appTxType).Scan(&tasks); err != nil {
		return nil, err
	}
	if tasks != r.Tasks {
		return nil, fmt.Errorf("bench: %d transactions enqueued a task and committed, but queues.task holds %d", r.Tasks, tasks)
	}
	e.progress.clear()
	r.finish()
	return r, nil
}

// appTxRun is one run of one side.
type appTxRun struct {
	rate          float64
	total         int64 // transactions committed, warm-up included
	measured      int64 // in the measured window
	notifications int64
	cpu0, cpu1    cpuSample
}

// cpuSpan sums the CPU of a side's runs.
type cpuSpan struct {
	a, b cpuSample
	n    int64
}

func (s *cpuSpan) add(r appTxRun) {
	s.a.client += r.cpu0.client
	s.b.client += r.cpu1.client
	if r.cpu0.server > 0 && r.cpu1.server > 0 {
		s.a.server += r.cpu0.server
		s.b.server += r.cpu1.server
	}
	s.n += r.measured
}

func (s *cpuSpan) cost() CPUCost { return cpuCost(s.a, s.b, s.n, runtime.NumCPU()) }

// appTxRun runs tx on cfg.Connections connections, each in a loop, for the warm-up and the
// measured window, and counts what committed in the window.
func (e *Env) appTxRun(ctx context.Context, pool *pgxpool.Pool, cfg AppTxConfig, heard *atomic.Int64,
	tx func(context.Context, pgx.Tx, int64) error) (appTxRun, error) {
	var run appTxRun
	var committed, seq atomic.Int64
	// The transactions run on ctx, never cancelled by the end of the run (a commit cut short
	// may have committed): each connection stops between two transactions.
	var stopped atomic.Bool
	failed := make(chan struct{})
	errc := make(chan error, cfg.Connections)
	var wg sync.WaitGroup
	for range cfg.Connections {
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
	stop := func() { stopped.Store(true) }
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
	err := wait(cfg.Warmup)
	c0, n0, h0, t0 := e.cpuNow(), committed.Load(), heard.Load(), time.Now()
	if err == nil {
		err = wait(cfg.Duration)
	}
	c1, n1, h1, took := e.cpuNow(), committed.Load(), heard.Load(), time.Since(t0)
	stop()
	wg.Wait()
	close(errc)
	if first := <-errc; first != nil {
		return run, fmt.Errorf("bench: a transaction failed: %w", first)
	}
	if err != nil {
		return run, err
	}
	run.total, run.measured, run.notifications = committed.Load(), n1-n0, h1-h0
	run.rate, run.cpu0, run.cpu1 = rate(n1-n0, took), c0, c1
	return run, nil
}

// countNotifications listens for NOTIFY taskorch_task on a connection of its own and counts
// what it hears until stop.
func (e *Env) countNotifications(ctx context.Context) (*atomic.Int64, func(), error) {
	conn, err := pgx.ConnectConfig(ctx, e.cfg.ConnConfig.Copy())
	if err != nil {
		return nil, nil, fmt.Errorf("bench: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "listen taskorch_task"); err != nil {
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
				if !errors.Is(err, context.Canceled) && lctx.Err() == nil {
					e.log.Warn("bench: the notification counter stopped", "error", err)
				}
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

// medianOf vs (the lower middle of an even count's two); 0 for none.
func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
