package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/humanize"
)

func newQueuesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "queues", Short: "List, pause and resume task types"}
	var actor string
	pause := &cobra.Command{
		Use:   "pause TYPE",
		Short: "Stop workers from claiming tasks of TYPE (running ones finish; enqueueing goes on)",
		Long: `Stop workers from claiming tasks of TYPE: running ones finish, enqueueing goes on. TYPE is a
task type, or db_function:<schema.function> for one SQL function's db_function tasks alone (the
other functions' run on; docs/sql.md, "Queue controls and the outbox").`,
		Example: `  taskorch queues pause reports.render
  taskorch queues pause db_function:billing.recalc`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			changed, err := c.PauseQueue(cmd.Context(), args[0], resolveActor(actor))
			if err != nil {
				return err
			}
			return printQueueChange(cmd, g, args[0], "paused", changed)
		},
	}
	resume := &cobra.Command{
		Use:   "resume TYPE",
		Short: "Let workers claim tasks of TYPE again",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			changed, err := c.ResumeQueue(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printQueueChange(cmd, g, args[0], "running", changed)
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the queues (task types, each SQL function): backlog per state, paused (by whom, since when) or running",
		Long: `List every queue with work in it (pending, running, failed or dead tasks), paused, among the
2,000 newest tasks, claimed by a registered worker or enqueued by a schedule: its tasks due now,
scheduled for later, running, failed and dead, how long its oldest due task has waited, whether
it is paused (by whom, since when) or running, and how many registered workers claim it.

A queue is a task type, or one SQL function's db_function tasks, listed as
db_function:<schema.function>: the name queues pause and a limit take. A worker that claims
db_function serves every function, so each function's line counts those workers. db_function
itself has a line only while it is paused (which holds every function: their lines say "paused
with db_function") or when a task of it names no function.

A queue with due tasks that no registered worker claims (none has its Go handler or its
channel's provider) is marked "0 · unserved", and a warning on stderr names it: its tasks wait,
spending no attempt, until such a worker starts. Completed and cancelled tasks are not counted:
that would read the whole history (taskorch tasks list --status completed lists them). The
dashboard's queues page shows the same.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := g.connectRead(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer pool.Close()
			qs, err := admin.ListQueues(cmd.Context(), pool)
			if err != nil {
				return err
			}
			if g.jsonOut {
				if qs == nil {
					qs = []admin.Queue{}
				}
				return writeJSON(cmd.OutOrStdout(), qs)
			}
			if err := printQueues(cmd.OutOrStdout(), qs); err != nil {
				return err
			}
			warnUnserved(cmd.ErrOrStderr(), qs)
			return nil
		},
	}
	for _, c := range []*cobra.Command{pause, resume, list} {
		addJSONFlag(c, g)
	}
	addActorFlag(pause, &actor)
	cmd.AddCommand(pause, resume, list)
	return cmd
}

func printQueues(w io.Writer, qs []admin.Queue) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tSTATE\tDUE\tSCHEDULED\tRUNNING\tFAILED\tDEAD\tOLDEST DUE\tWORKERS")
	for _, q := range qs {
		state := q.State
		if q.PausedAt != nil {
			state = fmt.Sprintf("paused by %s since %s", dash(derefStr(q.PausedBy)), q.PausedAt.UTC().Format(time.RFC3339))
			if q.PausedQueue != nil { // a function held by the pause of db_function
				state = fmt.Sprintf("paused with %s by %s since %s", *q.PausedQueue, dash(derefStr(q.PausedBy)), q.PausedAt.UTC().Format(time.RFC3339))
			}
		}
		oldest := "-"
		if q.Due > 0 {
			oldest = humanize.Duration(humanize.FromSeconds(q.OldestDueSeconds).Round(time.Second)) + " ago"
		}
		workers := strconv.FormatInt(q.Workers, 10)
		if q.Unserved {
			workers += " · unserved"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", q.TaskType, state, q.Due, q.Scheduled, q.Running, q.Failed, q.Dead, oldest, workers)
	}
	return tw.Flush()
}

// warnUnserved names on w each type with due tasks that no registered worker claims.
func warnUnserved(w io.Writer, qs []admin.Queue) {
	for _, q := range qs {
		if q.Unserved {
			fmt.Fprintf(w, "warning: no live worker claims %s tasks: %d due, the oldest waiting %s; they wait for %s\n",
				q.TaskType, q.Due, time.Duration(q.OldestDueSeconds*float64(time.Second)).Round(time.Second), admin.ServeHint(q.TaskType))
		}
	}
}

func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func printQueueChange(cmd *cobra.Command, g *globals, taskType, state string, changed bool) error {
	if g.jsonOut {
		return writeJSON(cmd.OutOrStdout(), map[string]any{"task_type": taskType, "state": state, "changed": changed})
	}
	if changed {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", taskType, state)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: already %s\n", taskType, state)
	}
	return nil
}
