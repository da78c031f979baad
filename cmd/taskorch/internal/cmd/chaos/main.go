// Command chaos runs taskorch's fault-injection harness (internal/chaos) and prints its table:
// `make chaos` (100,000 workload items) and `make chaos-short` (10,000, what CI runs). It exits
// 1 when anything was lost or duplicated, a failure was left unexplained or a fault kind was
// never injected; 2 when the harness itself could not run.
//
//	go run ./internal/cmd/chaos -bin bin/taskorch -tasks 10000 -duration 150s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/chaos"
)

func main() {
	var cfg chaos.Config
	var jsonOut string
	var verbose bool
	flag.StringVar(&cfg.Binary, "bin", "bin/taskorch", "the taskorch command the workers run (make build)")
	flag.IntVar(&cfg.Tasks, "tasks", 10000, "workload items: Go tasks, db_function tasks and email processes")
	flag.DurationVar(&cfg.Duration, "duration", 0, "how long faults are injected, over the phases (default 150s)")
	flag.IntVar(&cfg.Workers, "workers", 3, "workers on the host in each phase")
	flag.IntVar(&cfg.NetnsWorkers, "netns-workers", 2, "workers in network namespaces of their own, in the last phase")
	flag.IntVar(&cfg.Concurrency, "concurrency", 16, "each worker's TASKORCH_CONCURRENCY")
	flag.DurationVar(&cfg.LeaseDuration, "lease", 0, "the workers' TASKORCH_LEASE_DURATION (default 3s)")
	flag.DurationVar(&cfg.Drain, "drain", 0, "how long to wait for the queue to drain after the faults (default 5m)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the workload and the fault schedule (default: the clock)")
	redis := flag.Bool("redis", true, "run the Redis transport phase (needs redis-server)")
	netns := flag.Bool("netns", true, "run the network namespace phase (needs root and ip netns)")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for the run's PostgreSQL and logs (default: a temporary one, deleted after a pass)")
	flag.BoolVar(&cfg.Keep, "keep", false, "keep the run's directory after a pass")
	flag.StringVar(&jsonOut, "json", "", "also write the report as JSON to this file")
	flag.BoolVar(&verbose, "v", false, "log every fault and the progress (default: faults at info level too)")
	flag.Parse()
	cfg.NoRedis, cfg.NoNetns = !*redis, !*netns

	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	rep.Print(os.Stdout)
	if jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(jsonOut, append(b, '\n'), 0o644) //nolint:gosec // a report
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos: writing the JSON report:", err)
			os.Exit(2)
		}
	}
	if !rep.Passed() {
		os.Exit(1)
	}
}
