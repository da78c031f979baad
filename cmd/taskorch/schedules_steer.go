package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch/internal/admin"
)

// newScheduleSteerCmds returns schedules pause, resume, run and backfill: an operator steering
// a schedule, each action recorded with --actor in queues.schedule_event.
func newScheduleSteerCmds(g *globals) []*cobra.Command {
	var actor string
	toggle := func(use, short string, do func(cmd *cobra.Command, name string) (bool, error), done, already string) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " NAME",
			Short: short,
			Args:  exactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				changed, err := do(cmd, args[0])
				if err != nil {
					return mapAdminError(err)
				}
				if g.jsonOut {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"name": args[0], "changed": changed})
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
	pause := toggle("pause", "Stop a schedule's ticks (the tasks it enqueued stay); resume starts it again",
		func(cmd *cobra.Command, name string) (bool, error) {
			pool, err := g.connect(cmd.Context())
			if err != nil {
				return false, err
			}
			defer pool.Close()
			return admin.PauseSchedule(cmd.Context(), pool, name, resolveActor(actor))
		}, "paused schedule %s", "schedule %s was paused already")
	resume := toggle("resume", "Let a paused schedule tick again, from its first tick after now (what it missed is not replayed: backfill it)",
		func(cmd *cobra.Command, name string) (bool, error) {
			pool, err := g.connect(cmd.Context())
			if err != nil {
				return false, err
			}
			defer pool.Close()
			return admin.ResumeSchedule(cmd.Context(), pool, name, resolveActor(actor))
		}, "resumed schedule %s", "schedule %s was not paused")

	run := &cobra.Command{
		Use:   "run NAME",
		Short: "Enqueue one task of a schedule now, outside its ticks (its next tick does not move)",
		Long: `Enqueues one task of the schedule now, with the schedule's type, payload, priority and max
attempts, and the idempotency key schedule:NAME:now:<the time>. The schedule's next tick does
not move, and a paused schedule runs too. The run is recorded with --actor.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pool, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			id, err := admin.RunScheduleNow(cmd.Context(), pool, args[0], resolveActor(actor))
			if err != nil {
				return mapAdminError(err)
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"name": args[0], "task_id": id})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "enqueued task %d of schedule %s\n", id, args[0])
			return err
		},
	}
	addActorFlag(run, &actor)
	addJSONFlag(run, g)

	var from, to string
	var dryRun bool
	backfill := &cobra.Command{
		Use:   "backfill NAME --from WHEN [--to WHEN]",
		Short: "Enqueue the ticks a schedule should have had in a window, each once",
		Long: `Enqueues every tick of the schedule from --from to --to (both included; --to defaults to now),
each under the tick's own idempotency key (schedule:NAME:<tick>), the key the leader enqueues it
with: a tick whose task exists already (the leader enqueued it, or an earlier backfill did, and
retention has not pruned it) is not enqueued again. The ticks are computed from the schedule's
cron expression as it is now, with the leader's parser. WHEN is a duration ago (90m, 6h, 2d) or
a time (2030-01-02T15:04:05Z, 2030-01-02T15:04, 2030-01-02; UTC). A window may hold up to
10,000 ticks. --dry-run lists the ticks and enqueues nothing. Recorded with --actor.`,
		Example: `  taskorch schedules backfill nightly-report --from 2030-01-01 --to 2030-01-07
  taskorch schedules backfill sweep --from 6h --dry-run`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			if from == "" {
				return usageErrorf("backfill needs --from: the window's start")
			}
			f, err := parseWhen(from, now)
			if err != nil {
				return usageErrorf("--from %q: %v", from, err)
			}
			t := now
			if to != "" {
				if t, err = parseWhen(to, now); err != nil {
					return usageErrorf("--to %q: %v", to, err)
				}
			}
			pool, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			b, err := admin.BackfillSchedule(cmd.Context(), pool, args[0], f, t, resolveActor(actor), dryRun)
			if err != nil {
				return mapAdminError(err)
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), b)
			}
			w := cmd.OutOrStdout()
			if dryRun {
				fmt.Fprintf(w, "would backfill %d %s of schedule %s (dry run: nothing enqueued)\n", len(b.Ticks),
					plural(int64(len(b.Ticks)), "tick", "ticks"), b.Schedule)
				for _, tick := range b.Ticks {
					fmt.Fprintf(w, "  %s\n", tick.Format(time.RFC3339))
				}
				return nil
			}
			_, err = fmt.Fprintf(w, "backfilled schedule %s: %d %s in the window, %d enqueued, %d enqueued already\n",
				b.Schedule, len(b.Ticks), plural(int64(len(b.Ticks)), "tick", "ticks"), b.Enqueued, b.Existing)
			return err
		},
	}
	backfill.Flags().StringVar(&from, "from", "", "the window's first moment (a duration ago, or a time)")
	backfill.Flags().StringVar(&to, "to", "", "the window's last moment (default: now)")
	backfill.Flags().BoolVar(&dryRun, "dry-run", false, "list the window's ticks, enqueue nothing")
	addActorFlag(backfill, &actor)
	addJSONFlag(backfill, g)
	return []*cobra.Command{pause, resume, run, backfill}
}
