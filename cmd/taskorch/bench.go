package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/bench"
)

// benchFlags are the settings every bench mode shares.
type benchFlags struct {
	inPlace    bool
	keep       bool
	cpuProfile string
	timeout    time.Duration
	pollOnly   bool
	listenURL  string
}

func newBenchCmd(g *globals) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput, latency, backlog, processes, memory, slot use, bloat pressure and enqueues in an application's transactions on a database",
		Long: `Measures taskorch on the database it is given (DATABASE_URL or --database-url), like river bench.

It creates a database of its own on the same server (taskorch_bench_<random>), migrates it, runs,
and drops it. A user who may not create databases (or --in-place) benchmarks in the given
database instead, refuses if tasks are pending or running there, and deletes its rows at the end.

Each mode prints a table, or one JSON object with --json. Progress goes to stderr when it is a
terminal. The method and the figures: docs/benchmarks.md.

  taskorch bench throughput --tasks 100000 --concurrency 200
  taskorch bench throughput --steady --duration 30s
  taskorch bench latency --rate 1000 --duration 10s
  taskorch bench backlog --backlog 5000000
  taskorch bench processes --count 10000
  taskorch bench memory --tasks 100
  taskorch bench slots --concurrency 16 --work 1ms
  taskorch bench pressure --rate 2000 --phase 60s
  taskorch bench pressure --rate 10000 --phases clean --phase 10m --sample 1m
  taskorch bench app-tx --connections 32 --duration 10s
  taskorch bench rate --rate 20 --burst 1 --workers 3
  taskorch bench workflow --diamonds 10000
  taskorch bench workflows --steps 5
  taskorch bench push --tasks 20000`,
	}
	pf := cmd.PersistentFlags()
	pf.BoolVar(&g.jsonOut, "json", false, "print one JSON object instead of a table")
	pf.BoolVar(&f.inPlace, "in-place", false, "work in the given database instead of creating one (its rows are deleted afterwards)")
	pf.BoolVar(&f.keep, "keep", false, "keep the benchmark's database (or rows) afterwards, for a look")
	pf.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (pprof) to this file")
	pf.DurationVar(&f.timeout, "timeout", 30*time.Minute, "give up after this long")
	pf.BoolVar(&f.pollOnly, "poll-only", false, "workers without LISTEN, for a DATABASE_URL through a transaction pooler")
	pf.StringVar(&f.listenURL, "listen-database-url", "", "a direct URL of the same server: the workers LISTEN there while their work goes through DATABASE_URL, a transaction pooler")

	cmd.AddCommand(newBenchThroughputCmd(g, f), newBenchLatencyCmd(g, f), newBenchBacklogCmd(g, f),
		newBenchProcessesCmd(g, f), newBenchMemoryCmd(g, f), newBenchSlotsCmd(g, f), newBenchPressureCmd(g, f),
		newBenchAppTxCmd(g, f), newBenchRateCmd(g, f), newBenchWorkflowCmd(g, f), newBenchWorkflowsCmd(g, f), newBenchSleepersCmd(g, f),
		newBenchPushCmd(g, f))
	return cmd
}

func newBenchWorkflowCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.WorkflowConfig{}
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Diamonds of tasks (1 → 2 → 1) against as many independent tasks, in the same run; tasks/s and ratio",
		Long: `Runs bench throughput with 4 × --diamonds no-op tasks, and --diamonds diamonds of no-op tasks
(a task, two after it, one after both: docs/workflows.md), each bulk-enqueued and then worked by
the same in-process workers, --rounds times each, alternating, and prints both medians and their
ratio (docs/benchmarks.md).`,
		Example: `  taskorch bench workflow --diamonds 10000`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Diamonds < 1 {
				return usageErrorf("--diamonds must be at least 1, got %d", c.Diamonds)
			}
			if c.Rounds < 1 {
				return usageErrorf("--rounds must be at least 1, got %d", c.Rounds)
			}
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Workflow(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.WorkerOptions, 200)
	cmd.Flags().IntVar(&c.Diamonds, "diamonds", 10_000, "diamonds (4 tasks each) to enqueue and work")
	cmd.Flags().IntVar(&c.Rounds, "rounds", 3, "runs of each side, alternating; the medians are reported")
	return cmd
}

func newBenchWorkflowsCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.DurableConfig{}
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "Durable Go workflows of --steps Steps against as many independent tasks as steps, in the same run; workflows/s, steps/s and ratio",
		Long: `Runs bench throughput with --workflows × --steps no-op tasks, then --workflows durable workflows
(docs/workflows.md, "Durable workflows in Go") of --steps no-op Steps each, each bulk-enqueued and
then worked by the same in-process workers, and prints tasks/s, workflows/s, steps/s and the ratio
of steps/s to tasks/s (docs/benchmarks.md).`,
		Example: `  taskorch bench workflows --steps 5`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Workflows < 1 || c.Steps < 1 || c.Steps > 1000 {
				return usageErrorf("--workflows must be at least 1 and --steps between 1 and 1000, got %d and %d", c.Workflows, c.Steps)
			}
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Durable(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.WorkerOptions, 200)
	cmd.Flags().IntVar(&c.Workflows, "workflows", 10_000, "durable workflows to enqueue and work")
	cmd.Flags().IntVar(&c.Steps, "steps", 5, "Steps per workflow")
	return cmd
}

func newBenchSleepersCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.SleepersConfig{}
	cmd := &cobra.Command{
		Use:   "sleepers",
		Short: "What durable workflows asleep cost: claim durations and an idle worker's memory, without and with --sleepers of them",
		Long: `Runs one in-process worker under a steady load of --rate no-op tasks a second for --phase, then
idle; then puts --sleepers durable workflows (docs/workflows.md, "Durable workflows in Go") to
sleep for 30 days, each after one Step; then the same load and idle again. Prints, per phase, the
claim statements' durations under the load and while idle, the resident memory of a fresh
taskorch worker process started in each idle time, and the ratios with the sleepers to without
(docs/benchmarks.md, "Durable workflows asleep").`,
		Example: `  taskorch bench sleepers --sleepers 100000`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Sleepers < 1 || c.Rate < 1 || c.Phase <= 0 || c.Concurrency < 1 || c.Concurrency > 1000 {
				return usageErrorf("--sleepers and --rate must be at least 1, --phase positive and --concurrency between 1 and 1000, got %d, %d, %s and %d",
					c.Sleepers, c.Rate, c.Phase, c.Concurrency)
			}
			if c.WorkerBinary == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find this binary to run as the idle worker (pass --worker-bin): %w", err)
				}
				c.WorkerBinary = self
			}
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Sleepers(ctx, e, c)
			})
		},
	}
	cmd.Flags().IntVar(&c.Concurrency, "concurrency", 100, "task slots of the worker")
	cmd.Flags().IntVar(&c.Sleepers, "sleepers", 100_000, "durable workflows to put to sleep between the phases")
	cmd.Flags().IntVar(&c.Rate, "rate", 1000, "no-op tasks enqueued a second in each phase")
	cmd.Flags().DurationVar(&c.Phase, "phase", 20*time.Second, "how long each phase enqueues")
	cmd.Flags().DurationVar(&c.Idle, "idle", 5*time.Second, "how long the worker idles after each phase's load (a fresh taskorch worker process's RSS is read meanwhile)")
	cmd.Flags().StringVar(&c.WorkerBinary, "worker-bin", "", "the taskorch binary to run as the idle worker process (default: this one)")
	return cmd
}

func newBenchPushCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.PushConfig{}
	cmd := &cobra.Command{
		Use:   "push",
		Short: "No-op tasks pushed to an HTTP endpoint on this machine against a Go handler, in the same run; tasks/s and ratio",
		Long: `Runs bench throughput with --tasks no-op tasks run by a Go handler, then --tasks more pushed to an
HTTP endpoint served by this process on 127.0.0.1 (which checks each request's signature and
answers 204), as taskorch worker --http-target pushes them (docs/worker.md, "Push workers"); each
bulk-enqueued and then worked by the same in-process workers. Prints both rates and their ratio
(docs/benchmarks.md).`,
		Example: `  taskorch bench push --tasks 20000`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Tasks < 1 {
				return usageErrorf("--tasks must be at least 1, got %d", c.Tasks)
			}
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Push(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.WorkerOptions, 200)
	cmd.Flags().IntVar(&c.Tasks, "tasks", 20_000, "no-op tasks per run (the Go handler's, then the pushed)")
	return cmd
}

func addWorkerFlags(cmd *cobra.Command, o *bench.WorkerOptions, concurrency int) {
	fl := cmd.Flags()
	fl.IntVar(&o.Workers, "workers", 1, "in-process workers (each with its own claim loop and completer)")
	fl.IntVar(&o.Concurrency, "concurrency", concurrency, "task slots per worker")
	fl.IntVar(&o.FetchBatch, "fetch-batch", 0, "most tasks one claim takes (default: the worker's own, concurrency + claim-ahead, at most 1,000)")
	fl.BoolVar(&o.Metrics, "metrics", false, "give each worker a Prometheus registry, as taskorch worker has")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		switch {
		case o.Workers < 1:
			return usageErrorf("--workers must be at least 1, got %d", o.Workers)
		case o.Concurrency < 1:
			return usageErrorf("--concurrency must be at least 1, got %d", o.Concurrency)
		case o.FetchBatch < 0:
			return usageErrorf("--fetch-batch must be at least 1 (or unset for the worker's default), got %d", o.FetchBatch)
		}
		return nil
	}
}

func newBenchThroughputCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.ThroughputConfig{}
	cmd := &cobra.Command{
		Use:   "throughput",
		Short: "No-op tasks bulk-enqueued, then worked (or --steady: enqueued while worked); tasks/s",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Throughput(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.WorkerOptions, 200)
	addThroughputFlags(cmd, &c)
	cmd.Flags().IntVar(&c.LimitKeys, "limit-keys", 0, "limit the tasks to 1 running per key over this many keys (the limited claim path's cost; bulk only)")
	cmd.Flags().BoolVar(&c.Steady, "steady", false, "enqueue while working and measure for --duration")
	cmd.Flags().DurationVar(&c.Duration, "duration", 10*time.Second, "steady: how long to measure")
	cmd.Flags().DurationVar(&c.Warmup, "warmup", time.Second, "steady: how long to run before measuring")
	return cmd
}

func addThroughputFlags(cmd *cobra.Command, c *bench.ThroughputConfig) {
	cmd.Flags().IntVar(&c.Tasks, "tasks", 100_000, "no-op tasks to enqueue and work")
	cmd.Flags().StringVar(&c.Enqueue, "enqueue", "many", "bulk enqueue: many (EnqueueMany, 5,000 a statement) or copy (COPY)")
}

func newBenchLatencyCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.LatencyConfig{}
	cmd := &cobra.Command{
		Use:   "latency",
		Short: "Tasks enqueued one by one at a fixed rate; enqueue→start and enqueue→complete percentiles",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("notify-coalesce-ms") {
				ms, err := cmd.Flags().GetInt("notify-coalesce-ms")
				if err != nil {
					return err
				}
				c.NotifyCoalesceMS = &ms
			}
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Latency(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.WorkerOptions, 100)
	cmd.Flags().IntVar(&c.Rate, "rate", 1000, "tasks enqueued per second")
	cmd.Flags().DurationVar(&c.Duration, "duration", 10*time.Second, "how long tasks arrive (measured)")
	cmd.Flags().DurationVar(&c.Warmup, "warmup", time.Second, "how long tasks arrive before the measured ones")
	cmd.Flags().IntVar(&c.Enqueuers, "enqueuers", 64, "connections enqueuing in parallel")
	cmd.Flags().Int("notify-coalesce-ms", 0, "set queues.settings.notify_coalesce_ms for the run, then put it back (unset: keep the database's)")
	return cmd
}

func newBenchBacklogCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.BacklogConfig{}
	baseline := true
	cmd := &cobra.Command{
		Use:   "backlog",
		Short: "Throughput with --backlog finished tasks in history, and its ratio to the empty tables",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.NoBaseline = !baseline
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Backlog(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.Throughput.WorkerOptions, 200)
	addThroughputFlags(cmd, &c.Throughput)
	cmd.Flags().IntVar(&c.History, "backlog", 1_000_000, "finished tasks (with their leases) to put in the tables")
	cmd.Flags().BoolVar(&baseline, "baseline", true, "measure empty tables too, in the same run, and print the ratio")
	cmd.Flags().IntVar(&c.Rounds, "rounds", 3, "runs a side (baseline and history alternate); the medians are reported")
	return cmd
}

func newBenchProcessesCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.ProcessesConfig{}
	cmd := &cobra.Command{
		Use:   "processes",
		Short: "Supervised email sends (comms.send_email) with the outbox provider; processes/s end to end",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, g, []string{"comms"}, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Processes(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.WorkerOptions, 32)
	cmd.Flags().IntVar(&c.Count, "count", 10_000, "email sends to start")
	cmd.Flags().DurationVar(&c.CheckInterval, "check-interval", time.Second, "comms.process_config check_interval for the run")
	return cmd
}

func newBenchSlotsCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.SlotsConfig{}
	cmd := &cobra.Command{
		Use:   "slots",
		Short: "A backlog worked by handlers that sleep --work each; tasks/s and slot utilisation",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Slots(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.WorkerOptions, 16)
	cmd.Flags().DurationVar(&c.Work, "work", time.Millisecond, "how long each handler works (it sleeps)")
	cmd.Flags().IntVar(&c.Tasks, "tasks", 0, "backlog enqueued before the start (default: about 2 s of ideal work, 1,000 to 200,000)")
	return cmd
}

func newBenchRateCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.RateConfig{}
	cmd := &cobra.Command{
		Use:   "rate",
		Short: "A rate limit under a backlog: the claims per second the workers deliver, against the limit's rate and ceiling",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Rate(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.WorkerOptions, 16)
	c.Workers = 3
	cmd.Flags().Lookup("workers").DefValue = "3"
	cmd.Flags().Float64Var(&c.Rate, "rate", 20, "the limit's claims per second")
	cmd.Flags().IntVar(&c.Burst, "burst", 1, "the limit's burst")
	cmd.Flags().DurationVar(&c.Duration, "duration", 20*time.Second, "the span measured, after the warm-up")
	cmd.Flags().DurationVar(&c.Warmup, "warmup", 2*time.Second, "how long the workers run before the span, from the first task handled")
	return cmd
}

func newBenchPressureCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.PressureConfig{}
	cmd := &cobra.Command{
		Use:   "pressure",
		Short: "A steady producer through clean, open-xid, readers and recovery phases; completions/s, claim p99, depth, dead tuples",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Pressure(ctx, e, c)
			})
		},
	}
	addWorkerFlags(cmd, &c.WorkerOptions, 100)
	cmd.Flags().IntVar(&c.Rate, "rate", 2000, "tasks enqueued per second (open loop, EnqueueMany every 5 ms)")
	cmd.Flags().DurationVar(&c.Phase, "phase", time.Minute, "each phase's length (clean, open_xid, readers, recovery)")
	cmd.Flags().DurationVar(&c.Warmup, "warmup", time.Second, "how long to run before the clean phase, from the first task handled")
	cmd.Flags().IntVar(&c.Readers, "readers", 4, "REPEATABLE READ transactions scanning the queue tables in the readers phase")
	cmd.Flags().DurationVar(&c.ReaderPause, "reader-pause", 0, "how long each reader waits, its snapshot held, between scans (0: back to back)")
	cmd.Flags().StringSliceVar(&c.Phases, "phases", nil, "the phases to run, in order (default clean,open_xid,readers,recovery; a sustained-load run: clean)")
	cmd.Flags().DurationVar(&c.Sample, "sample", 0, "also measure each phase in windows of this length (throughput, claim p99, depth, dead tuples of queues.task), and compare the last with the first")
	return cmd
}

func newBenchAppTxCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.AppTxConfig{}
	cmd := &cobra.Command{
		Use:   "app-tx",
		Short: "An application's transactions: an order row + EnqueueTx, against the order row alone; tx/s and ratio",
		Args:  noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			switch {
			case c.Connections < 1:
				return usageErrorf("--connections must be at least 1, got %d", c.Connections)
			case c.Duration <= 0:
				return usageErrorf("--duration must be positive, got %s", c.Duration)
			case c.Warmup < 0:
				return usageErrorf("--warmup must not be negative, got %s", c.Warmup)
			case c.Rounds < 1:
				return usageErrorf("--rounds must be at least 1, got %d", c.Rounds)
			case c.Workers < 0:
				return usageErrorf("--workers must not be negative, got %d", c.Workers)
			case c.Concurrency < 1:
				return usageErrorf("--concurrency must be at least 1, got %d", c.Concurrency)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.AppTx(ctx, e, c)
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&c.Connections, "connections", 32, "connections committing transactions at once, each in a loop")
	fl.DurationVar(&c.Duration, "duration", 10*time.Second, "how long each run is measured")
	fl.DurationVar(&c.Warmup, "warmup", 2*time.Second, "how long each run goes before it is measured")
	fl.IntVar(&c.Rounds, "rounds", 3, "runs of each side, alternating; the medians are reported")
	fl.IntVar(&c.Workers, "workers", 0, "in-process workers working the tasks as they come (0: none; the tasks wait)")
	fl.IntVar(&c.Concurrency, "concurrency", 100, "task slots per worker (with --workers)")
	return cmd
}

func newBenchMemoryCmd(g *globals, f *benchFlags) *cobra.Command {
	c := bench.MemoryConfig{}
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "RSS of a separate taskorch worker process running --tasks sleeping tasks at once",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.WorkerBinary == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find this binary to run as the worker (pass --worker-bin): %w", err)
				}
				c.WorkerBinary = self
			}
			return f.run(cmd, g, nil, func(ctx context.Context, e *bench.Env) (bench.Result, error) {
				return bench.Memory(ctx, e, c)
			})
		},
	}
	cmd.Flags().IntVar(&c.Tasks, "tasks", 100, "sleeping tasks at once (the worker's concurrency)")
	cmd.Flags().DurationVar(&c.Sample, "sample", 2*time.Second, "how long to sample the RSS while they run")
	cmd.Flags().StringVar(&c.WorkerBinary, "worker-bin", "", "the taskorch binary to run as the worker (default: this one)")
	return cmd
}

// run opens the benchmark database, runs mode in it, prints the result and cleans up.
func (f *benchFlags) run(cmd *cobra.Command, g *globals, processes []string, mode func(context.Context, *bench.Env) (bench.Result, error)) (err error) {
	if g.databaseURL == "" {
		return usageErrorf("no database: set DATABASE_URL or pass --database-url (taskorch dev prints one)")
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	var progress io.Writer
	if isTTY(cmd.ErrOrStderr()) {
		progress = cmd.ErrOrStderr()
	}
	env, err := bench.Open(ctx, bench.Options{DatabaseURL: g.databaseURL, InPlace: f.inPlace, Keep: f.keep,
		Processes: processes, Progress: progress, Log: cmd.ErrOrStderr(), PollOnly: f.pollOnly, ListenURL: f.listenURL})
	if err != nil {
		return redact(err)
	}
	defer func() { err = errors.Join(err, redact(env.Close(ctx))) }()
	if f.keep && !g.jsonOut {
		fmt.Fprintf(cmd.ErrOrStderr(), "keeping the benchmark database: %s\n", env.Info.Database)
	}

	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return usageErrorf("--cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			_ = pf.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			err = errors.Join(err, pf.Close())
		}()
	}
	res, err := mode(ctx, env)
	if err != nil {
		return err
	}
	if g.jsonOut {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	for _, r := range res.Table() {
		fmt.Fprintf(tw, "%s\t%s\n", r.Name, r.Value)
	}
	return tw.Flush()
}
