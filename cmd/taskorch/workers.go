package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/admin"
)

func newWorkersCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "workers", Short: "Inspect the registered workers; quiet one before a deploy, and resume it"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the workers with their heartbeat, pool size, running tasks and the leader",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := g.connectRead(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer pool.Close()
			ws, err := admin.ListWorkers(cmd.Context(), pool)
			if err != nil {
				return err
			}
			if g.jsonOut {
				if ws == nil {
					ws = []admin.Worker{}
				}
				return writeJSON(cmd.OutOrStdout(), ws)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKER\tHOST\tSTATE\tLEADER\tPOOL\tRUNNING\tLAST HEARTBEAT\tSTARTED\tVERSION")
			for _, w := range ws {
				leader := ""
				if w.Leader {
					leader = "yes"
				}
				state := "active"
				if w.QuietSince != nil {
					state = "quiet since " + w.QuietSince.UTC().Format(time.RFC3339) + " (" + w.QuietBy + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s ago\t%s\t%s\n", w.ID, w.Hostname, state, dash(leader), w.PoolSize, w.RunningTasks,
					time.Since(w.LastHeartbeat).Round(time.Second), w.StartedAt.UTC().Format(time.RFC3339), dash(w.Version))
			}
			return tw.Flush()
		},
	}
	addJSONFlag(list, g)
	cmd.AddCommand(list, newWorkerQuietCmd(g, true), newWorkerQuietCmd(g, false))
	return cmd
}

// newWorkerQuietCmd returns workers quiet (quiet) or workers resume: an operator stopping one
// worker from claiming, recorded with --actor in queues.worker_event.
func newWorkerQuietCmd(g *globals, quiet bool) *cobra.Command {
	use, short := "resume", "Let a quiet worker claim again (from its next heartbeat)"
	do, done, already := admin.ResumeWorker, "resumed worker %s", "worker %s was not quiet"
	if quiet {
		use = "quiet"
		short = "Tell a worker to finish the tasks it runs and claim nothing more (from its next heartbeat), e.g. before a deploy; it stays registered, and leads if elected"
		do, done, already = admin.QuietWorker, "quieted worker %s: it finishes its running tasks and claims nothing more from its next heartbeat", "worker %s was quiet already"
	}
	var actor string
	c := &cobra.Command{
		Use:   use + " WORKER_ID",
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pool, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			changed, err := do(cmd.Context(), pool, args[0], resolveActor(actor))
			if err != nil {
				return mapAdminError(err)
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"worker_id": args[0], "changed": changed})
			}
			msg := done
			if !changed {
				msg = already
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), msg+"\n", args[0])
			return err
		},
	}
	addActorFlag(c, &actor)
	addJSONFlag(c, g)
	return c
}

func newSchedulesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "schedules", Short: "Periodic tasks: list, add, remove, pause, resume, run now and backfill schedules"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the schedules (SOURCE: code, declared in a worker's WorkerConfig.Periodic; added, with schedules add)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, closeFn, err := g.readClient(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			ss, err := c.Schedules(cmd.Context())
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), ss)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCRON\tTASK TYPE\tENABLED\tSOURCE\tNEXT RUN\tLAST TASK")
			for _, s := range ss {
				next, last := "-", "-"
				if s.NextRunAt != nil {
					next = s.NextRunAt.UTC().Format(time.RFC3339)
				}
				if s.LastTaskID != nil {
					last = fmt.Sprint(*s.LastTaskID)
				}
				source := "added" // with add_schedule (taskorch schedules add)
				if s.DeclaredInCode {
					source = "code" // WorkerConfig.Periodic: the leader keeps it as the code says
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\t%s\n", s.Name, s.Cron, s.TaskType, s.Enabled, source, next, last)
			}
			return tw.Flush()
		},
	}
	addJSONFlag(list, g)

	var priority, maxAttempts int
	var disabled bool
	add := &cobra.Command{
		Use:   "add NAME CRON TYPE [PAYLOAD]",
		Short: "Add (or replace) a schedule: TYPE with PAYLOAD at every tick of CRON",
		Example: `  taskorch schedules add nightly-report '0 3 * * *' db_function '{"db_function":"reports.nightly"}'
  taskorch schedules add heartbeat '*/5 * * * *' taskorch.noop`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 3 || len(args) > 4 {
				return usageErrorf("want NAME CRON TYPE [PAYLOAD], got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			args0 := taskorch.RawArgs{Type: args[2]}
			if len(args) == 4 {
				payload, err := parsePayload(args[3])
				if err != nil {
					return err
				}
				args0.Payload = payload
			}
			p := &taskorch.ScheduleParams{Name: args[0], Cron: args[1], Args: args0, MaxAttempts: maxAttempts, Disabled: disabled}
			if cmd.Flags().Changed("priority") {
				p.Priority = &priority
			}
			c, closeFn, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			created, err := c.AddSchedule(cmd.Context(), p) // a bad schedule is ErrInvalidInput: exit 2
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"name": p.Name, "created": created})
			}
			verb := "replaced"
			if created {
				verb = "added"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s schedule %s\n", verb, p.Name)
			return err
		},
	}
	add.Flags().IntVar(&priority, "priority", 0, "priority of the tasks it enqueues")
	add.Flags().IntVar(&maxAttempts, "max-attempts", 0, "max attempts of the tasks it enqueues (default 25)")
	add.Flags().BoolVar(&disabled, "disabled", false, "add it without running it")
	addJSONFlag(add, g)

	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a schedule (the tasks it enqueued stay)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, closeFn, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			if err := c.RemoveSchedule(cmd.Context(), args[0]); err != nil { // ErrNotFound: exit 3
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed schedule %s\n", args[0])
			return err
		},
	}
	cmd.AddCommand(list, add, remove)
	cmd.AddCommand(newScheduleSteerCmds(g)...)
	return cmd
}
