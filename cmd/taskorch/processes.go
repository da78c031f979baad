package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch/internal/admin"
)

func newProcessesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "processes",
		Short: "See business process instances: running, waiting, succeeded, failed, timed_out",
		Long: "Business processes (email, SMS, file and account deletion, and those written with `taskorch scaffold process`)\n" +
			"register in queues.process; these commands read their instances (docs/processes.md, \"Seeing processes\").",
	}

	var (
		state, process string
		limit          int
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List process instances, newest first, with their state",
		Long: `Lists the instances of every registered process (queues.process_instances), newest first:
state (running, waiting until T, succeeded, failed, or timed_out: a wait step's signal did not
come in time, an outcome rather than a failure), attempts, start and end, the instance that
started it, and the terminal failure's error or the timeout's reason. Unknown process: exit code 3.`,
		Example: `  taskorch processes list --state failed
  taskorch processes list --process comms.send_email --limit 20 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != "" && !slices.Contains(admin.ProcessStates, state) {
				return usageErrorf("--state must be one of %s, got %q", strings.Join(admin.ProcessStates, ", "), state)
			}
			if limit < 1 || limit > 10000 {
				return usageErrorf("--limit must be between 1 and 10000, got %d", limit)
			}
			pool, err := g.connectRead(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer pool.Close()
			xs, err := admin.ListProcessInstances(cmd.Context(), pool, admin.ProcessFilter{State: state, Process: process, Limit: limit})
			if err != nil {
				return err
			}
			if g.jsonOut {
				if xs == nil {
					xs = []admin.ProcessInstance{}
				}
				return writeJSON(cmd.OutOrStdout(), map[string]any{"instances": xs})
			}
			return printProcessInstances(cmd.OutOrStdout(), xs)
		},
	}
	list.Flags().StringVar(&state, "state", "", "only instances in this state (running, waiting, succeeded, failed, timed_out)")
	list.Flags().StringVar(&process, "process", "", "only this process (SCHEMA.NAME, e.g. comms.send_email)")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many instances (1 to 10000)")
	addJSONFlag(list, g)

	show := &cobra.Command{
		Use:   "show SCHEMA.NAME ID",
		Short: "Show a process instance: its state, attempts 1..n, facts, supervisor tasks and the instances it started",
		Long: `Shows one instance of a registered process: its state; its attempts numbered 1..n in the order
they were made, each with its channel task, that task's status and the outcome fact (a failure the
provider called permanent says so: it ended the run at once, without a retry); its facts in
time order; the supervisor tasks that ran or will run it; and the instances it started (an account
deletion's file deletions and anonymization). Unknown process or instance: exit code 3.`,
		Example: `  taskorch processes show comms.send_email 42
  taskorch processes show accounts.account_deletion 7 --json`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || id <= 0 {
				return usageErrorf("instance id must be a positive integer, got %q", args[1])
			}
			pool, err := g.connectRead(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer pool.Close()
			var d *admin.ProcessDetail
			err = pgx.BeginTxFunc(cmd.Context(), pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
				func(tx pgx.Tx) error {
					var err error
					d, err = admin.ShowProcessInstance(cmd.Context(), tx, args[0], id)
					return err
				})
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			return printProcessDetail(cmd.OutOrStdout(), d)
		},
	}
	addJSONFlag(show, g)
	cmd.AddCommand(list, show, newProcessesRetryCmd(g))
	return cmd
}

// newProcessesRetryCmd is `taskorch processes retry`: queues.retry_process.
func newProcessesRetryCmd(g *globals) *cobra.Command {
	var reason string
	retry := &cobra.Command{
		Use:   "retry SCHEMA.NAME ID --reason TEXT",
		Short: "Restart a failed process instance: same root, new attempts, the reason recorded as a fact",
		Long: `Restarts a failed instance of a registered process (queues.retry_process): the root row and its
facts stay, a restart fact records the reason and who, and the supervisor's next tick starts new
attempts with a fresh attempt budget, numbered after the old ones (docs/processes.md, "Retrying a
failed process"). No --reason: exit code 2. Unknown process or instance: exit code 3. An
instance that is running, waiting, succeeded or timed_out, or a process that cannot be retried by
hand: exit code 4. Nothing is written when it is refused.`,
		Example: `  taskorch processes retry comms.send_email 42 --reason "provider key rotated"
  taskorch processes retry files.file_deletion 7 --reason "bucket policy fixed" --json`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || id <= 0 {
				return usageErrorf("instance id must be a positive integer, got %q", args[1])
			}
			if strings.TrimSpace(reason) == "" {
				return usageErrorf("--reason is required: say why the instance is retried (it is recorded with the restart)")
			}
			pool, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			r, err := admin.RetryProcessInstance(cmd.Context(), pool, args[0], id, reason)
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "restarted %s %d: run %d, by %s: %s\n", r.Process, r.ID, r.Run, r.RestartedBy, r.Reason)
			return err
		},
	}
	retry.Flags().StringVar(&reason, "reason", "", "why the instance is retried (required; recorded with the restart)")
	addJSONFlag(retry, g)
	return retry
}

// stateText is an instance's state as tables show it: "waiting until T" for a waiting one.
func stateText(x admin.ProcessInstance) string {
	if x.State == "waiting" && x.WaitUntil != nil {
		return "waiting until " + ts(x.WaitUntil)
	}
	return x.State
}

func attemptsText(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}

func parentText(x admin.ProcessInstance) string {
	if x.ParentProcess == nil || x.ParentID == nil {
		return "-"
	}
	return *x.ParentProcess + " " + strconv.FormatInt(*x.ParentID, 10)
}

func printProcessInstances(w io.Writer, xs []admin.ProcessInstance) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESS\tID\tSTATE\tATTEMPTS\tSTARTED\tENDED\tPARENT\tERROR")
	for _, x := range xs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Process, x.ID, stateText(x), attemptsText(x.Attempts),
			ts(&x.StartedAt), ts(x.EndedAt), parentText(x), short(deref(x.Error), 60))
	}
	if len(xs) == 0 {
		fmt.Fprintln(tw, "(no instances)")
	}
	return tw.Flush()
}

func printProcessDetail(w io.Writer, d *admin.ProcessDetail) error {
	x := d.Instance
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("process", x.Process+" ("+d.Title+")")
	row("instance", strconv.FormatInt(x.ID, 10))
	state := stateText(x)
	if d.Permanent {
		state += " (a permanent failure: not retried)"
	}
	row("state", state)
	row("attempts", attemptsText(x.Attempts))
	row("started at", ts(&x.StartedAt))
	row("ended at", ts(x.EndedAt))
	row("error", deref(x.Error))
	row("parent", parentText(x))
	if err := tw.Flush(); err != nil {
		return err
	}

	section := func(title string, empty bool) {
		fmt.Fprintf(w, "\n%s:\n", title)
		if empty {
			fmt.Fprintln(w, "  (none)")
		}
	}
	section("attempts", len(d.Attempts) == 0)
	if len(d.Attempts) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tMADE\tTASK\tTASK STATUS\tOUTCOME\tAT\tERROR")
		for _, a := range d.Attempts {
			outcome := a.Outcome
			if a.Outcome == "failed" && a.Permanent() {
				outcome += " (permanent)"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.N, ts(a.CreatedAt), derefI(a.TaskID), deref(a.TaskStatus),
				outcome, ts(a.EndedAt), short(deref(a.Error), 80))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	section("facts", len(d.Facts) == 0)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range d.Facts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", ts(&f.At), f.Fact, short(f.Detail, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	section("supervisor tasks", len(d.Tasks) == 0 && d.TasksNote == "")
	if d.TasksNote != "" {
		fmt.Fprintf(w, "  (%s)\n", d.TasksNote)
	}
	if len(d.Tasks) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TASK\tSTATUS\tRUN AT\tATTEMPT\tLAST ERROR")
		for _, t := range d.Tasks {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\n", t.ID, t.Status, ts(&t.RunAt), t.Attempt, short(deref(t.LastError), 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	section("started", len(d.Children) == 0)
	if len(d.Children) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, c := range d.Children {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", c.Process, c.ID, stateText(c), short(deref(c.Error), 60))
		}
		return tw.Flush()
	}
	return nil
}
