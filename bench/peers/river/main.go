// Command riverbench measures River (github.com/riverqueue/river) on the workload of
// `taskorch bench throughput`: N no-op jobs bulk-inserted into a fresh database, then worked
// by one client; jobs per second from the client's start to the last completion, and the CPU
// each job cost. It uses River's public API only, and lives in a module of its own so that
// taskorch does not depend on River. `make bench-peers` runs it alternately with taskorch;
// the method and the figures are in docs/benchmarks.md.
//
//	DATABASE_URL=postgres://... go run . --jobs 200000 --json
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// config is what the flags set.
type config struct {
	DatabaseURL       string
	Jobs              int
	MaxWorkers        int
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
	Insert            string
	MaxConns          int
	JSON              bool
	Keep              bool
	Timeout           time.Duration

	// Mode is throughput (the default) or app-tx (apptx.go).
	Mode string
	// app-tx: connections, each run's measured window and warm-up, rounds of each side, whether
	// a started client works the jobs (with Concurrency workers), and the client's
	// FetchCooldown, which also spaces its insert notifications (River's default, 100 ms, unless
	// --fetch-cooldown is given).
	Connections      int
	Duration         time.Duration
	Warmup           time.Duration
	Rounds           int
	Work             bool
	Concurrency      int
	AppFetchCooldown time.Duration
}

// parseFlags reads the command line (getenv gives DATABASE_URL's default); a bad value is an
// error that names the flag.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("riverbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.DatabaseURL, "database-url", getenv("DATABASE_URL"), "a server where this user may create databases (default $DATABASE_URL)")
	fs.IntVar(&c.Jobs, "jobs", 100_000, "no-op jobs to insert, then work")
	// River's own `river bench` runs one queue of 2,000 workers with a 2 ms fetch cooldown and a
	// 20 ms fetch poll interval: the settings its authors found fastest.
	fs.IntVar(&c.MaxWorkers, "max-workers", 2000, "the queue's MaxWorkers (river bench's)")
	fs.DurationVar(&c.FetchCooldown, "fetch-cooldown", 2*time.Millisecond, "Config.FetchCooldown (river bench's)")
	fs.DurationVar(&c.FetchPollInterval, "fetch-poll-interval", 20*time.Millisecond, "Config.FetchPollInterval (river bench's)")
	fs.StringVar(&c.Insert, "insert", "many", "bulk insert: many (InsertMany, as river bench) or fast (InsertManyFast); 5,000 jobs a call")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "the pool's MaxConns (default pgxpool's, as river bench)")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object instead of a table")
	fs.BoolVar(&c.Keep, "keep", false, "keep the benchmark's database afterwards")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Minute, "give up after this long")
	fs.StringVar(&c.Mode, "mode", "throughput", "throughput (bulk insert, then work) or app-tx (an application's transactions: an order row + InsertTx, against the order row alone)")
	fs.IntVar(&c.Connections, "connections", 32, "app-tx: connections committing transactions at once, each in a loop")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "app-tx: how long each run is measured")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "app-tx: how long each run goes before it is measured")
	fs.IntVar(&c.Rounds, "rounds", 3, "app-tx: runs of each side, alternating; the medians are reported")
	fs.BoolVar(&c.Work, "work", false, "app-tx: start the client, working the jobs as they come")
	fs.IntVar(&c.Concurrency, "concurrency", 100, "app-tx: the queue's MaxWorkers (with --work)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	// app-tx runs River as an application would: its default FetchCooldown, unless given.
	c.AppFetchCooldown = river.FetchCooldownDefault
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "fetch-cooldown" {
			c.AppFetchCooldown = c.FetchCooldown
		}
	})
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.DatabaseURL == "":
		return c, errors.New("no database: set DATABASE_URL or pass --database-url")
	case c.Jobs <= 0:
		return c, fmt.Errorf("--jobs must be positive, got %d", c.Jobs)
	case c.MaxWorkers <= 0 || c.MaxWorkers > 10_000:
		return c, fmt.Errorf("--max-workers must be between 1 and 10000 (River's limit), got %d", c.MaxWorkers)
	case c.FetchCooldown < time.Millisecond || c.FetchPollInterval < time.Millisecond:
		return c, errors.New("--fetch-cooldown and --fetch-poll-interval must be at least 1ms (River's minimum)")
	case c.Insert != "many" && c.Insert != "fast":
		return c, fmt.Errorf("--insert %q: want many or fast", c.Insert)
	case c.MaxConns < 0:
		return c, fmt.Errorf("--max-conns must not be negative, got %d", c.MaxConns)
	case c.Mode != "throughput" && c.Mode != "app-tx":
		return c, fmt.Errorf("--mode %q: want throughput or app-tx", c.Mode)
	case c.Connections < 1:
		return c, fmt.Errorf("--connections must be at least 1, got %d", c.Connections)
	case c.Duration <= 0 || c.Warmup < 0:
		return c, errors.New("--duration must be positive and --warmup not negative")
	case c.Rounds < 1:
		return c, fmt.Errorf("--rounds must be at least 1, got %d", c.Rounds)
	case c.Concurrency < 1 || c.Concurrency > 10_000:
		return c, fmt.Errorf("--concurrency must be between 1 and 10000, got %d", c.Concurrency)
	}
	return c, nil
}

// result is one run. Keys mean what `taskorch bench throughput --json`'s keys of the same
// name mean; the others are River's settings.
type result struct {
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

	Tasks               int64   `json:"tasks"`
	Workers             int     `json:"workers"`     // River clients: 1
	Concurrency         int     `json:"concurrency"` // the queue's MaxWorkers
	MaxWorkers          int     `json:"max_workers"`
	FetchCooldownMS     float64 `json:"fetch_cooldown_ms"`
	FetchPollIntervalMS float64 `json:"fetch_poll_interval_ms"`
	PoolMaxConns        int32   `json:"pool_max_conns"`
	Enqueue             string  `json:"enqueue"`

	EnqueueSeconds        float64 `json:"enqueue_seconds"`
	EnqueueTasksPerSecond float64 `json:"enqueue_tasks_per_second"`
	Seconds               float64 `json:"seconds"`
	TasksPerSecond        float64 `json:"tasks_per_second"`
	CPU                   cpuCost `json:"cpu_per_task"`
}

func main() {
	c, err := parseFlags(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) //nolint:forbidigo // main owns the root context
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	r, err := run(ctx, c, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
	if err := print(os.Stdout, r, c.JSON); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

// run creates a database of its own on the server, runs River's migrations there, measures,
// and drops the database (unless --keep), also when the run fails.
func run(ctx context.Context, c config, log io.Writer) (r any, err error) {
	server, err := pgx.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = server.Close(context.WithoutCancel(ctx)) }()
	var mayCreate bool
	if err := server.QueryRow(ctx, `select rolsuper or rolcreatedb from pg_roles where rolname = current_user`).Scan(&mayCreate); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if !mayCreate {
		return nil, errors.New("this user may not create databases; riverbench works in a database of its own")
	}
	name := "river_bench_" + randomHex(4)
	if _, err := server.Exec(ctx, "create database "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	if !c.Keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if _, derr := server.Exec(dctx, "drop database if exists "+pgx.Identifier{name}.Sanitize()+" with (force)"); derr != nil {
				err = errors.Join(err, fmt.Errorf("drop database %s: %w", name, derr))
			}
		}()
	}
	u, err := withDatabase(c.DatabaseURL, name)
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, fmt.Errorf("the database URL: %w", err)
	}
	if c.MaxConns > 0 {
		pcfg.MaxConns = int32(min(c.MaxConns, 10_000)) //nolint:gosec // bounded
	} else if c.Mode == "app-tx" {
		pcfg.MaxConns = int32(min(c.Connections+8, 10_000)) //nolint:gosec // bounded: the transactions' connections and the client's
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if c.Mode == "app-tx" {
		return runAppTx(ctx, c, pool, name, log)
	}

	t := &result{Mode: "throughput", System: "river", RiverVersion: moduleVersion("github.com/riverqueue/river"),
		PgxVersion: moduleVersion("github.com/jackc/pgx/v5"), Database: name, DatabaseCreated: true, Kept: c.Keep,
		StartedAt: time.Now().UTC().Truncate(time.Millisecond), CPUs: runtime.NumCPU(), LoadBefore: loadAverage(),
		Tasks: int64(c.Jobs), Workers: 1, Concurrency: c.MaxWorkers, MaxWorkers: c.MaxWorkers,
		FetchCooldownMS: ms(c.FetchCooldown), FetchPollIntervalMS: ms(c.FetchPollInterval), PoolMaxConns: pcfg.MaxConns}
	t.Enqueue = map[string]string{"many": "InsertMany", "fast": "InsertManyFast"}[c.Insert]
	if err := pool.QueryRow(ctx, settingsSQL).Scan(&t.ServerVersion, &t.Fsync, &t.SynchronousCommit, &t.FullPageWrites, &t.SharedBuffers); err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		return nil, err
	}
	if err := measure(ctx, c, pool, t, log); err != nil {
		return nil, err
	}
	t.LoadAfter = loadAverage()
	return t, nil
}

const settingsSQL = `select current_setting('server_version'), current_setting('fsync'),
	current_setting('synchronous_commit'), current_setting('full_page_writes'), current_setting('shared_buffers')`

// migrate runs River's migrations.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// runAppTx runs the app-tx mode (apptx.go) in the created database name, on pool.
func runAppTx(ctx context.Context, c config, pool *pgxpool.Pool, name string, log io.Writer) (*appTxResult, error) {
	r := &appTxResult{Mode: "app-tx", System: "river", RiverVersion: moduleVersion("github.com/riverqueue/river"),
		PgxVersion: moduleVersion("github.com/jackc/pgx/v5"), Database: name, DatabaseCreated: true, Kept: c.Keep,
		StartedAt: time.Now().UTC().Truncate(time.Millisecond), CPUs: runtime.NumCPU(), LoadBefore: loadAverage(),
		Connections: c.Connections, DurationSeconds: c.Duration.Seconds(), WarmupSeconds: c.Warmup.Seconds(),
		Rounds: c.Rounds, FetchCooldownMS: ms(c.AppFetchCooldown)}
	if err := pool.QueryRow(ctx, settingsSQL).Scan(&r.ServerVersion, &r.Fsync, &r.SynchronousCommit, &r.FullPageWrites, &r.SharedBuffers); err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		return nil, err
	}
	if err := measureAppTx(ctx, c, pool, r, log); err != nil {
		return nil, err
	}
	r.LoadAfter = loadAverage()
	return r, nil
}

// noopArgs are the benchmark's jobs: no arguments to speak of.
type noopArgs struct{}

// Kind implements river.JobArgs.
func (noopArgs) Kind() string { return "riverbench_noop" }

// noopWorker works a job by doing nothing.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

// Work implements river.Worker.
func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// measure inserts c.Jobs jobs, then starts one client and times it from its start to the last
// completion it reports (a completion event follows the completer's commit).
func measure(ctx context.Context, c config, pool *pgxpool.Pool, r *result, log io.Writer) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown:     c.FetchCooldown,
		FetchPollInterval: c.FetchPollInterval,
		Logger:            slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.MaxWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "checkpoint"); err != nil {
		fmt.Fprintln(log, "riverbench: no checkpoint before the run:", err)
	}

	const batch = 5000
	params := make([]river.InsertManyParams, min(c.Jobs, batch))
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	t0 := time.Now()
	for done := 0; done < c.Jobs; done += batch {
		p := params[:min(batch, c.Jobs-done)]
		if c.Insert == "fast" {
			_, err = client.InsertManyFast(ctx, p)
		} else {
			_, err = client.InsertMany(ctx, p)
		}
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	enq := time.Since(t0)
	r.EnqueueSeconds, r.EnqueueTasksPerSecond = round3(enq.Seconds()), rate(r.Tasks, enq)
	if _, err := pool.Exec(ctx, "analyze river_job"); err != nil {
		return err
	}

	// Sized for every job's event: a full channel drops events, and the count would never end.
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: c.Jobs,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled}})
	defer unsubscribe()

	postmaster := findPostmaster(ctx, pool)
	cpu0 := cpuNow(postmaster)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	var worked int64
	stall := time.NewTimer(time.Minute)
	defer stall.Stop()
	for worked < r.Tasks {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d jobs worked: %w", worked, r.Tasks, ctx.Err())
		case <-stall.C:
			return fmt.Errorf("stalled at %d of %d jobs for a minute", worked, r.Tasks)
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("job %d: unexpected %s", ev.Job.ID, ev.Kind)
			}
			worked++
			stall.Reset(time.Minute)
		}
	}
	took := time.Since(start)
	r.CPU = costOf(cpu0, cpuNow(postmaster), r.Tasks, runtime.NumCPU())
	r.Seconds, r.TasksPerSecond = round3(took.Seconds()), rate(r.Tasks, took)

	var completed int64
	if err := pool.QueryRow(ctx, `select count(*) from river_job where state = 'completed'`).Scan(&completed); err != nil {
		return err
	}
	if completed != r.Tasks {
		return fmt.Errorf("%d of %d jobs completed in the database", completed, r.Tasks)
	}
	return nil
}

func print(w io.Writer, v any, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if a, ok := v.(*appTxResult); ok {
		for _, row := range a.rows() {
			fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
		}
		return tw.Flush()
	}
	r, ok := v.(*result)
	if !ok {
		return fmt.Errorf("nothing to print: %T", v)
	}
	for _, row := range [][2]string{
		{"system", fmt.Sprintf("River %s (pgx %s)", r.RiverVersion, r.PgxVersion)},
		{"database", r.Database + " (created for the run)"},
		{"server", fmt.Sprintf("PostgreSQL %s, fsync=%s, synchronous_commit=%s, full_page_writes=%s, shared_buffers=%s",
			r.ServerVersion, r.Fsync, r.SynchronousCommit, r.FullPageWrites, r.SharedBuffers)},
		{"machine", fmt.Sprintf("%d CPUs, load average %v before, %v after", r.CPUs, r.LoadBefore, r.LoadAfter)},
		{"jobs", fmt.Sprintf("%d no-op (bulk-inserted with %s, then worked)", r.Tasks, r.Enqueue)},
		{"client", fmt.Sprintf("1, MaxWorkers %d, FetchCooldown %v ms, FetchPollInterval %v ms, pool %d conns",
			r.MaxWorkers, r.FetchCooldownMS, r.FetchPollIntervalMS, r.PoolMaxConns)},
		{"insert", fmt.Sprintf("%.3f s, %.0f jobs/s", r.EnqueueSeconds, r.EnqueueTasksPerSecond)},
		{"worked in", fmt.Sprintf("%.3f s", r.Seconds)},
		{"throughput", fmt.Sprintf("%.0f jobs/s", r.TasksPerSecond)},
		{"CPU per job", fmt.Sprintf("%.1f µs client + %.1f µs server", r.CPU.Client, r.CPU.Server)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

// moduleVersion is the version of module path this binary was built with.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "unknown"
}

// withDatabase returns the URL (or key=value connection string) u pointing at database name.
func withDatabase(u, name string) (string, error) {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		p, err := url.Parse(u)
		if err != nil {
			return "", fmt.Errorf("the database URL: %w", err)
		}
		p.Path, p.RawPath = "/"+name, ""
		return p.String(), nil
	}
	return u + " dbname=" + name, nil
}

func loadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return nil
	}
	out := make([]float64, 3)
	for i := range out {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round1(float64(n) / d.Seconds())
}
