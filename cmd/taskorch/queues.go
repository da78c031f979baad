package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newQueuesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "queues", Short: "Pause and resume task types"}
	pause := &cobra.Command{
		Use:   "pause TYPE",
		Short: "Stop workers from claiming tasks of TYPE (running ones finish; enqueueing goes on)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			changed, err := c.PauseQueue(cmd.Context(), args[0], "")
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
		Short: "List the paused task types",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			ps, err := c.PausedQueues(cmd.Context())
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), ps)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK TYPE\tPAUSED AT\tPAUSED BY")
			for _, p := range ps {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", p.TaskType, p.PausedAt.UTC().Format(time.RFC3339), dash(p.PausedBy))
			}
			return tw.Flush()
		},
	}
	for _, c := range []*cobra.Command{pause, resume, list} {
		addJSONFlag(c, g)
	}
	cmd.AddCommand(pause, resume, list)
	return cmd
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
