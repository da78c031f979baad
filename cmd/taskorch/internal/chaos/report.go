package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskorch/taskorch/internal/humanize"
)

// PhaseReport is one phase of a run.
type PhaseReport struct {
	Name     string         `json:"name"`
	Duration time.Duration  `json:"duration"`
	Faults   map[string]int `json:"faults"`
}

// Report is the outcome of a run.
type Report struct {
	Tasks        int    `json:"tasks"`
	Workers      int    `json:"workers"`
	NetnsWorkers int    `json:"netns_workers"`
	Seed         uint64 `json:"seed"`
	// Faults counts the faults injected, by kind (FaultKinds); Required lists the kinds the
	// run's phases call for, each of which must have been injected at least once.
	Faults   map[string]int `json:"faults"`
	Required []string       `json:"required"`
	Phases   []PhaseReport  `json:"phases"`
	// Result is what the checker found in the database.
	Result *Result `json:"result"`
	// Logs is what the workers' logs say about fencing.
	Logs logCounts `json:"worker_logs"`
	// WorkersStarted counts worker processes (restarts included); UnexpectedExits those that
	// exited without being killed or stopped.
	WorkersStarted  int `json:"workers_started"`
	UnexpectedExits int `json:"unexpected_exits"`
	// ProducerRetries counts enqueue batches sent again after an error (PostgreSQL restarts).
	ProducerRetries int `json:"producer_retries"`
	// OpenAfterDrain is the number of tasks still pending or running when the drain gave up.
	OpenAfterDrain int64         `json:"open_after_drain"`
	Drain          time.Duration `json:"drain"`
	Wall           time.Duration `json:"wall"`
	Dir            string        `json:"dir"`
	// Kills is what became of the tasks each killed worker held (stranded.go).
	Kills []KillReport `json:"kills"`
}

// Missing lists the required fault kinds that were never injected.
func (r *Report) Missing() []string {
	var out []string
	for _, k := range r.Required {
		if r.Faults[k] == 0 {
			out = append(out, k)
		}
	}
	return out
}

// Idle lists the phases whose own workers claimed nothing: a phase that did no work proves
// nothing.
func (r *Report) Idle() []string {
	var out []string
	for _, p := range r.Phases {
		if check, ok := map[string]string{"redis": "claims_redis_transport", "netns": "claims_netns"}[p.Name]; ok &&
			r.Result != nil && r.Result.count(check) == 0 {
			out = append(out, p.Name)
		}
	}
	return out
}

// Passed reports whether nothing was lost, duplicated or left unexplained, every required
// fault was injected, and every phase's workers did work.
func (r *Report) Passed() bool {
	return r.Result != nil && r.Result.OK() && len(r.Missing()) == 0 && len(r.Idle()) == 0
}

// Print writes the report's table to w.
func (r *Report) Print(w io.Writer) {
	res := r.Result
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	line := func(label string, v any) { fmt.Fprintf(tw, "%s\t%v\t\n", label, v) }
	ns := ""
	if r.NetnsWorkers > 0 {
		ns = fmt.Sprintf(" (+%d in network namespaces)", r.NetnsWorkers)
	}
	fmt.Fprintf(w, "\ntaskorch chaos: %s workload items, %d workers per phase%s, seed %d\n\n",
		humanize.Thousands(int64(r.Tasks)), r.Workers, ns, r.Seed)

	fmt.Fprintf(tw, "fault\tinjected\t\n")
	var total int
	for _, k := range FaultKinds {
		if r.Faults[k] == 0 && !slices.Contains(r.Required, k) {
			continue
		}
		line(FaultNames[k], r.Faults[k])
		total += r.Faults[k]
	}
	line("total", total)
	_ = tw.Flush()
	var phases []string
	for _, p := range r.Phases {
		phases = append(phases, fmt.Sprintf("%s %s", p.Name, p.Duration.Round(time.Second)))
	}
	fmt.Fprintf(w, "phases: %s\n\n", strings.Join(phases, ", "))

	fmt.Fprintf(tw, "outcome\tcount\t\n")
	line("workload items enqueued", humanize.Thousands(int64(res.Expected.Total())))
	line("  Go tasks (noop, sleep)", humanize.Thousands(int64(res.Expected.GoTasks)))
	line("  db_function tasks (effects)", humanize.Thousands(int64(res.Expected.DBFunctionTasks)))
	line("  email processes (outbox)", humanize.Thousands(int64(res.Expected.EmailProcesses)))
	line("  workflows (diamonds, chains)", humanize.Thousands(int64(res.Expected.Workflows)))
	line("  durable Go workflows (8 durable calls each)", humanize.Thousands(int64(res.Expected.DurableWorkflows)))
	line("tasks (all of queues.task)", humanize.Thousands(res.Tasks))
	line("completed", humanize.Thousands(res.ByStatus["completed"]))
	line("failed or dead, each explained", humanize.Thousands(res.ByStatus["failed"]+res.ByStatus["dead"]))
	line("emails sent / processes given up", fmt.Sprintf("%s / %s", humanize.Thousands(res.EmailsSent), humanize.Thousands(res.EmailsGaveUp)))
	line("LOST", res.Lost())
	line("DUPLICATES", res.Duplicates())
	line("UNEXPLAINED FAILURES", res.Unexplained())
	line("refused stale completions (database)", humanize.Thousands(res.count("refused_completions")))
	line("refused stale failures (database)", humanize.Thousands(res.count("refused_failures")))
	line("refused outcomes (worker logs)", humanize.Thousands(int64(r.Logs.Refused)))
	line("tasks cancelled on lease loss (worker logs)", humanize.Thousands(int64(r.Logs.LeaseLost)))
	line("leases expired and rescued", humanize.Thousands(res.count("lease_expirations")))
	line("tasks recovered from workers silent past the timeout", humanize.Thousands(res.count("reaped_recoveries")))
	line("tasks recovered from workers whose session was gone", humanize.Thousands(res.count("session_recoveries")))
	line("tasks recovered by a worker taking over its id", humanize.Thousands(res.count("restart_recoveries")))
	line("workflow nodes claimed again after a fault", humanize.Thousands(res.count("workflow_nodes_rerun")))
	line("durable workflows a fault cut a run of", humanize.Thousands(res.count("durable_runs_cut")))
	line("durable Steps run again, with the same key", humanize.Thousands(res.count("durable_steps_rerun")))
	line("provider called twice (allowed)", humanize.Thousands(res.count("provider_called_twice")))
	line("claims by Redis-transport workers", humanize.Thousands(res.count("claims_redis_transport")))
	line("claims by workers in network namespaces", humanize.Thousands(res.count("claims_netns")))
	line("worker processes started", r.WorkersStarted)
	line("workers that exited by themselves", r.UnexpectedExits)
	line("producer batches retried", r.ProducerRetries)
	line("drain", r.Drain.Round(100*time.Millisecond))
	line("wall time", r.Wall.Round(time.Second))
	_ = tw.Flush()

	printKills(w, r.Kills)

	var bad []CheckResult
	for _, c := range res.Checks {
		if c.Kind != KindInfo && c.Count > 0 {
			bad = append(bad, c)
		}
	}
	if n := res.missingWorkload(); n > 0 {
		fmt.Fprintf(w, "\nLOST: %d workload items committed by the producer are not in the database (expected %+v, found %+v)\n",
			n, res.Expected, res.Found)
	}
	for _, c := range bad {
		fmt.Fprintf(w, "\n%s: %s — %d, e.g. %s\n  %s\n", strings.ToUpper(c.Kind), c.Name, c.Count, strings.Join(c.Samples, ", "), c.What)
	}
	if u := res.count("email_unexpected_outcome"); u > 0 {
		fmt.Fprintf(w, "\nnote: %d email processes ended otherwise than their recipient was set up for (not a loss: each has one terminal fact)\n", u)
	}
	if m := r.Missing(); len(m) > 0 {
		fmt.Fprintf(w, "\nFAULTS NEVER INJECTED: %s (lengthen -duration)\n", strings.Join(m, ", "))
	}
	if idle := r.Idle(); len(idle) > 0 {
		fmt.Fprintf(w, "\nPHASES WHOSE WORKERS CLAIMED NOTHING: %s\n", strings.Join(idle, ", "))
	}
	if r.Passed() {
		fmt.Fprintf(w, "\nPASS: nothing lost, nothing duplicated, every failure explained\n")
	} else {
		fmt.Fprintf(w, "\nFAIL (logs and the database are kept in %s)\n", r.Dir)
	}
}
