package chaos

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Config describes a chaos run. Binary is required; every other field has a default.
type Config struct {
	// Binary is the taskorch command the workers run (`make build` makes bin/taskorch).
	Binary string
	// Tasks is the number of workload items: Go tasks, db_function tasks and email processes
	// (which make several tasks each). Defaults to 10,000.
	Tasks int
	// Duration is how long faults are injected, over the three phases; the producer spreads
	// the workload over it. Defaults to 150 s.
	Duration time.Duration
	// Workers is the number of workers on the host in each phase. Defaults to 3.
	Workers int
	// NetnsWorkers is the number of workers in network namespaces of their own (one each) in
	// the last phase. Defaults to 2.
	NetnsWorkers int
	// Concurrency is each worker's TASKORCH_CONCURRENCY. Defaults to 16.
	Concurrency int
	// LeaseDuration is the workers' TASKORCH_LEASE_DURATION; pauses and cuts outlast it.
	// Defaults to 3 s.
	LeaseDuration time.Duration
	// WorkerTimeout is the workers' TASKORCH_WORKER_TIMEOUT: some pauses and cuts outlast it
	// too, and the leader reaps the silent worker. Defaults to 8 s.
	WorkerTimeout time.Duration
	// NoRedis skips the Redis transport phase (with its Redis restarts), which needs redis-server.
	NoRedis bool
	// NoNetns skips the network namespace phase (which needs root and `ip netns`).
	NoNetns bool
	// Drain bounds the wait, after the faults, for every task to finish. Defaults to 5 min.
	Drain time.Duration
	// Seed makes the workload and the fault schedule reproducible (the timing never is).
	// Defaults to the clock.
	Seed uint64
	// Dir holds the run's PostgreSQL, logs and sockets. Default: a new temporary directory,
	// deleted after a run that passed unless Keep.
	Dir string
	// Keep keeps Dir after a run that passed.
	Keep bool
	// Logger receives progress and every fault. Defaults to discarding.
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.Binary == "" {
		return errors.New("chaos: Config.Binary (the taskorch command) is required: make build")
	}
	if _, err := os.Stat(c.Binary); err != nil {
		return fmt.Errorf("chaos: the taskorch command: %w (make build)", err)
	}
	abs, err := filepath.Abs(c.Binary)
	if err != nil {
		return err
	}
	c.Binary = abs
	setDefault(&c.Tasks, 10000)
	setDefault(&c.Duration, 150*time.Second)
	setDefault(&c.Workers, 3)
	setDefault(&c.NetnsWorkers, 2)
	setDefault(&c.Concurrency, 16)
	setDefault(&c.LeaseDuration, 3*time.Second)
	setDefault(&c.WorkerTimeout, 8*time.Second)
	setDefault(&c.Drain, 5*time.Minute)
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano()) //nolint:gosec // a seed
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Tasks < 0 || c.Workers < 1 || c.Concurrency < 1 || c.Duration < 10*time.Second {
		return errors.New("chaos: Tasks >= 0, Workers >= 1, Concurrency >= 1 and Duration >= 10s")
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
