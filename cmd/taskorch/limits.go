package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
)

func newLimitsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "limits", Short: "Limit how many tasks of a type run at once and how fast they are claimed"}

	var p taskorch.LimitParams
	set := &cobra.Command{
		Use:   "set TYPE",
		Short: "Create or replace the limit of TYPE (at least one of --max-running and --rate)",
		Long: `Create or replace the limit of TYPE, enforced by every worker's claim (docs/limits.md):
--max-running N tasks of TYPE running at once, --rate R claims per second with bursts of up to
--burst B, each per distinct value of the payload field --key when given.`,
		Example: `  taskorch limits set email --rate 2
  taskorch limits set report.build --max-running 4 --key tenant`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A value given is checked as given: 0 is not "not given" (queues.set_limit's bounds).
			fl := cmd.Flags()
			if fl.Changed("max-running") && p.MaxRunning < 1 {
				return usageErrorf("limits set %s: --max-running must be at least 1, got %d "+
					"(to stop %[1]s from being claimed, pause it: taskorch queues pause %[1]s; to lift its limit: taskorch limits remove %[1]s)",
					args[0], p.MaxRunning)
			}
			if fl.Changed("rate") && !(p.RatePerSecond > 0 && p.RatePerSecond <= 1_000_000) {
				return usageErrorf("limits set %s: --rate must be above 0 and at most 1000000 claims per second, got %v "+
					"(to stop %[1]s from being claimed, pause it: taskorch queues pause %[1]s)", args[0], p.RatePerSecond)
			}
			if fl.Changed("burst") && (p.Burst < 1 || p.Burst > 1_000_000) {
				return usageErrorf("limits set %s: --burst must be between 1 and 1000000, got %d", args[0], p.Burst)
			}
			if !fl.Changed("max-running") && !fl.Changed("rate") {
				return usageErrorf("limits set %s: give --max-running, --rate or both (limits remove lifts a limit)", args[0])
			}
			c, done, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			p.TaskType = args[0]
			if err := c.SetLimit(cmd.Context(), &p); err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"task_type": p.TaskType, "set": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", p.TaskType, taskorch.Limit{
				MaxRunning: p.MaxRunning, RatePerSecond: p.RatePerSecond, Burst: max(p.Burst, 1), KeyField: p.KeyField,
			})
			return nil
		},
	}
	set.Flags().IntVar(&p.MaxRunning, "max-running", 0, "at most N tasks of TYPE running at once, across every worker")
	set.Flags().Float64Var(&p.RatePerSecond, "rate", 0, "at most R claims per second")
	set.Flags().IntVar(&p.Burst, "burst", 0, "with --rate: up to B claims at once after a quiet spell (default 1)")
	set.Flags().StringVar(&p.KeyField, "key", "", "apply the limit per value of this top-level payload field")

	remove := &cobra.Command{
		Use:   "remove TYPE",
		Short: "Lift the limit of TYPE",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if err := c.RemoveLimit(cmd.Context(), args[0]); err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"task_type": args[0], "removed": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: no limit\n", args[0])
			return nil
		},
	}

	list := &cobra.Command{
		Use:   "list",
		Short: "List the limits and their buckets in use: running, held back, tokens",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := g.readClient(cmd)
			if err != nil {
				return err
			}
			defer done()
			us, err := c.LimitUsage(cmd.Context())
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), us)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK TYPE\tLIMIT\tKEY\tRUNNING\tHELD\tTOKENS")
			for _, u := range us {
				key := dash(u.Key)
				if u.NullKey {
					key = "(no key)"
				}
				tokens := "-"
				if u.Tokens != nil {
					tokens = strconv.FormatFloat(*u.Tokens, 'f', 1, 64)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", u.TaskType, u.String(), key, u.Running, u.Held, tokens)
			}
			return tw.Flush()
		},
	}
	for _, c := range []*cobra.Command{set, remove, list} {
		addJSONFlag(c, g)
	}
	cmd.AddCommand(set, remove, list)
	return cmd
}
