package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/admin"
)

func newWorkflowsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "workflows", Short: "List, show and cancel workflows: tasks enqueued after one another"}

	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List the most recent workflows with their tasks counted by status",
		Long: `List the most recent workflows, newest first, with their tasks counted by status. A
workflow's id is the id of its first task (docs/workflows.md, "Workflows").`,
		Example: `  taskorch workflows list --limit 5`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return usageErrorf("--limit must be between 1 and 1000, got %d", limit)
			}
			c, closeFn, err := g.readClient(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			ws, err := c.Workflows(cmd.Context(), limit)
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"workflows": ws})
			}
			return printWorkflowList(cmd.OutOrStdout(), ws)
		},
	}
	list.Flags().IntVar(&limit, "limit", 20, "at most this many workflows (1 to 1000)")
	addJSONFlag(list, g)

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a workflow's tasks and the edges between them, or a durable workflow's steps",
		Long: `Show a workflow's tasks in id order (parents before children), each with its status, attempt
and the tasks it waits for (AFTER): the graph's edges. ID is the workflow's, the id of its first
task. When task ID is a durable Go workflow that has completed a durable call, it shows its steps
in call order (docs/workflows.md, "Durable workflows in Go"), each with its status (completed,
sleeping, waiting, received, timed_out, or running: the run in flight), attempt, duration, what it
waits for (time, a signal's name and key, tasks) and until when (a sleep's end, a signal wait's
deadline), and its result, masked. An id that is neither exits with code 3.`,
		Example: `  taskorch workflows show 41
  taskorch workflows show 41 --json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			c, closeFn, err := g.readClient(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			w, err := c.Workflow(cmd.Context(), id)
			if err != nil && !errors.Is(err, taskorch.ErrNotFound) {
				return err
			}
			d, derr := loadDurableWorkflow(cmd.Context(), c, id, time.Now())
			if derr != nil {
				return derr
			}
			if w == nil && d == nil {
				return err // no workflow's
			}
			if g.jsonOut {
				out := map[string]any{}
				if w != nil {
					out["workflow"] = w
				}
				if d != nil {
					out["durable"] = d
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			if w != nil {
				if err := printWorkflow(cmd.OutOrStdout(), w); err != nil || d == nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout())
			}
			return printDurableWorkflow(cmd.OutOrStdout(), d)
		},
	}
	addJSONFlag(show, g)

	var actor, reason string
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel every task of a workflow that has not ended",
		Long: `Cancel every task of workflow ID that has not ended: waiting, pending, running (its worker is
told at commit and its outcome refused), failed and dead tasks; completed and cancelled tasks stay
as they are. Each task cancelled gets an event naming --actor (TASKORCH_ACTOR, else the OS user)
and --reason (default "workflow ID cancelled"). A task whose row another transaction holds (a
completion in flight) is tried again for about two seconds; if some still are, the command says
how many and exits with code 1: run it again. An id that is no workflow's exits with code 3.
Needs execute on queues.cancel_workflow (docs/security.md, "An operator's role").`,
		Example: `  taskorch workflows cancel 41 --reason "order withdrawn"`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			c, closeFn, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := admin.CancelWorkflow(cmd.Context(), c.Pool(), id, resolveActor(actor), reason)
			if err != nil {
				return mapAdminError(err)
			}
			if g.jsonOut {
				if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "workflow %d: %d task(s) cancelled\n", id, res.Cancelled)
			}
			if res.Skipped > 0 {
				return fmt.Errorf("workflow %d: %d task(s) not ended were busy (another transaction held them): run the command again", id, res.Skipped)
			}
			return nil
		},
	}
	cancel.Flags().StringVar(&reason, "reason", "", "why, recorded in each task's cancelled event")
	addActorFlag(cancel, &actor)
	addJSONFlag(cancel, g)

	cmd.AddCommand(list, show, cancel)
	return cmd
}

// statusCounts is "1 completed, 3 waiting", in lifecycle order.
func statusCounts(counts map[taskorch.Status]int) string {
	var parts []string
	for _, s := range taskorch.Statuses {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	return strings.Join(parts, ", ")
}

func printWorkflowList(w io.Writer, ws []taskorch.WorkflowSummary) error {
	if len(ws) == 0 {
		_, err := fmt.Fprintln(w, "no workflows")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tTASKS\tSTATUSES")
	for _, s := range ws {
		fmt.Fprintf(tw, "%d\t%d\t%s\n", s.ID, s.Tasks, statusCounts(s.Counts))
	}
	return tw.Flush()
}

func printWorkflow(w io.Writer, wf *taskorch.WorkflowGraph) error {
	counts := map[taskorch.Status]int{}
	for _, n := range wf.Nodes {
		counts[n.Status]++
	}
	fmt.Fprintf(w, "workflow %d: %d tasks (%s)\n", wf.ID, len(wf.Nodes), statusCounts(counts))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tATTEMPT\tAFTER")
	for _, n := range wf.Nodes {
		after := "-"
		if len(n.Parents) > 0 {
			ids := make([]string, len(n.Parents))
			for i, p := range n.Parents {
				ids[i] = strconv.FormatInt(p, 10)
			}
			after = strings.Join(ids, ",")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", n.ID, short(n.Type, 60), n.Status, n.Attempt, after)
	}
	return tw.Flush()
}
