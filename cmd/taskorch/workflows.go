package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
)

func newWorkflowsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "workflows", Short: "List and show workflows: tasks enqueued after one another"}

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
		Short: "Show a workflow's tasks and the edges between them",
		Long: `Show a workflow's tasks in id order (parents before children), each with its status, attempt
and the tasks it waits for (AFTER): the graph's edges. ID is the workflow's, the id of its first
task; an id that is no workflow's exits with code 3.`,
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
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"workflow": w})
			}
			return printWorkflow(cmd.OutOrStdout(), w)
		},
	}
	addJSONFlag(show, g)

	cmd.AddCommand(list, show)
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

func printWorkflow(w io.Writer, wf *taskorch.Workflow) error {
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
