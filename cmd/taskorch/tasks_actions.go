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
	"github.com/taskorch/taskorch/internal/humanize"
)

// taskActionFlags are the flags of tasks retry|cancel|delete: the filter of a bulk action and
// how it runs.
type taskActionFlags struct {
	statuses       []string
	types          []string
	key            string
	since, until   string
	enqSince       string
	enqUntil       string
	dryRun         bool
	batch          int
	actor          string
	reason         string
	filterFlagsSet bool
}

var filterFlagNames = []string{"status", "type", "key", "since", "until", "enqueued-since", "enqueued-until"}

// newTaskActionCmd builds tasks retry, cancel or delete: by id (one or many), or every task a
// filter matches, in batches that lock nothing for long.
func newTaskActionCmd(g *globals, action admin.TaskAction) *cobra.Command {
	var f taskActionFlags
	verb := map[admin.TaskAction]string{admin.ActionRetry: "Retry", admin.ActionCancel: "Cancel", admin.ActionDelete: "Delete"}[action]
	short := map[admin.TaskAction]string{
		admin.ActionRetry:  "Put dead, failed or cancelled tasks back to pending, due now: by id, or every task a filter matches",
		admin.ActionCancel: "Cancel waiting, pending, running, failed or dead tasks: by id, or every task a filter matches",
		admin.ActionDelete: "Delete finished tasks (never a pending or running one): by id, or every task a filter matches",
	}[action]
	statuses := strings.Join(action.Statuses(), ", ")
	long := short + `.

By id: ` + strings.ToLower(verb) + ` each task named (up to any number, 1,000 a statement); a task that may not be
` + pastTense(action) + ` is reported and the others go on (exit code 3 when one does not exist, 4 when one is in a
state that forbids it).

By filter (--status, --type, --key, --since, --until, --enqueued-since, --enqueued-until): every
matching task that is ` + statuses + ` (--status narrows that), in batches of --batch tasks, each
one short transaction that never waits for a lock: a task whose row another transaction holds
is skipped and counted (run the command again). --dry-run counts the matching tasks and changes
nothing. --since and --until bound when a task finished (went dead or failed, was cancelled or
completed): a duration ago (90m, 1h, 7d) or a time (2030-01-02T15:04:05Z, 2030-01-02T15:04,
2030-01-02; UTC).

Each task ` + pastTense(action) + ` gets an event naming --actor (TASKORCH_ACTOR, else the OS user), shown by
taskorch tasks show and the dashboard's task page.`
	if action == admin.ActionCancel {
		long += `

By id, a durable Go workflow's cancel reaches the tasks it spawned (docs/workflows.md, "Cancelling
a durable workflow"): once its own cancel has committed, those not ended are cancelled too, in
short transactions that never wait for a lock, when the role may execute
queues.cancel_spawned_tasks; one still busy after about two seconds is reported (exit code 1): run
the command again.`
	}
	if action == admin.ActionDelete {
		long += `

Delete removes the task row and its error rows, as retention does; its lease and event history
stays until the leader drops its day, with a "deleted" event naming the actor. Its idempotency
key is free again.`
	}
	cmd := &cobra.Command{
		Use:   strings.ToLower(verb) + " [ID...]",
		Short: short,
		Long:  long,
		Example: map[admin.TaskAction]string{
			admin.ActionRetry: `  taskorch tasks retry 42
  taskorch tasks retry 42 43 44
  taskorch tasks retry --status dead --since 1h --dry-run
  taskorch tasks retry --status dead --type email --since 1h --actor ann`,
			admin.ActionCancel: `  taskorch tasks cancel 42
  taskorch tasks cancel --status pending --type report.build --reason "superseded by v2"`,
			admin.ActionDelete: `  taskorch tasks delete 42
  taskorch tasks delete --status dead --type legacy.sync --until 2030-01-01`,
		}[action],
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, n := range filterFlagNames {
				f.filterFlagsSet = f.filterFlagsSet || cmd.Flags().Changed(n)
			}
			switch {
			case len(args) > 0 && f.filterFlagsSet:
				return usageErrorf("give task ids or a filter (--%s), not both", strings.Join(filterFlagNames, ", --"))
			case len(args) == 0 && !f.filterFlagsSet:
				return usageErrorf("give task ids, or a filter: --%s (see '%s --help')", strings.Join(filterFlagNames, ", --"), cmd.CommandPath())
			case len(args) > 0 && (f.dryRun || cmd.Flags().Changed("batch")):
				return usageErrorf("--dry-run and --batch go with a filter, not with task ids")
			}
			if len(args) > 0 {
				return runTaskActionByID(cmd, g, action, args, f)
			}
			return runTaskActionByFilter(cmd, g, action, f)
		},
	}
	cmd.Flags().StringSliceVar(&f.statuses, "status", nil, "filter: only these statuses (among "+statuses+")")
	cmd.Flags().StringSliceVar(&f.types, "type", nil, "filter: only these task types (or one SQL function's queue, db_function:<schema.function>)")
	cmd.Flags().StringVar(&f.key, "key", "", "filter: only the task(s) with this idempotency key")
	cmd.Flags().StringVar(&f.since, "since", "", "filter: finished at or after this (a duration ago, e.g. 1h, or a time)")
	cmd.Flags().StringVar(&f.until, "until", "", "filter: finished before this (a duration ago, or a time)")
	cmd.Flags().StringVar(&f.enqSince, "enqueued-since", "", "filter: enqueued at or after this (a duration ago, or a time)")
	cmd.Flags().StringVar(&f.enqUntil, "enqueued-until", "", "filter: enqueued before this (a duration ago, or a time)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "with a filter: count the tasks it would "+strings.ToLower(verb)+", change nothing")
	cmd.Flags().IntVar(&f.batch, "batch", admin.DefaultBatch, "with a filter: tasks per statement (1 to 1000)")
	if action == admin.ActionCancel {
		cmd.Flags().StringVar(&f.reason, "reason", "", "why, recorded in each task's cancelled event")
	}
	addActorFlag(cmd, &f.actor)
	addJSONFlag(cmd, g)
	return cmd
}

func pastTense(a admin.TaskAction) string {
	return map[admin.TaskAction]string{admin.ActionRetry: "retried", admin.ActionCancel: "cancelled", admin.ActionDelete: "deleted"}[a]
}

// runTaskActionByID acts on the tasks named. One id keeps the command's original output: "task
// 42 is pending", or with --json the task.
func runTaskActionByID(cmd *cobra.Command, g *globals, action admin.TaskAction, args []string, f taskActionFlags) error {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := parseID(a)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	c, closeFn, err := g.client(cmd.Context())
	if err != nil {
		return err
	}
	defer closeFn()
	outs, err := admin.ActOnTaskIDs(cmd.Context(), c.Pool(), action, ids, resolveActor(f.actor), f.reason)
	if err != nil {
		return mapAdminError(err)
	}
	var problems []error
	var spawned map[int64]int64
	var busy []error // spawned tasks that stayed busy: reported after the tasks' own refusals
	if action == admin.ActionCancel {
		if spawned, busy, err = cancelSpawned(cmd.Context(), c.Pool(), outs, resolveActor(f.actor)); err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	single := len(outs) == 1
	var list []admin.TaskOutcome
	for _, o := range outs {
		if err := outcomeError(action, o); err != nil {
			problems = append(problems, err)
			list = append(list, o)
			continue
		}
		list = append(list, o)
		switch {
		case g.jsonOut && single:
			t, err := c.Get(cmd.Context(), o.TaskID)
			if errors.Is(err, taskorch.ErrNotFound) && action == admin.ActionDelete {
				return writeJSON(w, o)
			}
			if err != nil {
				return err
			}
			maskTask(t)
			if err := writeJSON(w, t); err != nil {
				return err
			}
		case g.jsonOut:
		case action == admin.ActionDelete:
			fmt.Fprintf(w, "task %d is deleted\n", o.TaskID)
		default:
			fmt.Fprintf(w, "task %d is %s\n", o.TaskID, deref(o.Status))
			if n := spawned[o.TaskID]; n > 0 {
				fmt.Fprintf(w, "task %d: %d task(s) it spawned cancelled\n", o.TaskID, n)
			}
		}
	}
	if g.jsonOut && !single {
		if err := writeJSON(w, map[string]any{"action": action, "tasks": list}); err != nil {
			return err
		}
	}
	return joinOutcomeErrors(append(problems, busy...))
}

// outcomeError turns a task's outcome into the error the command reports for it: nil when the
// task was acted on (or was in the state asked for already).
func outcomeError(action admin.TaskAction, o admin.TaskOutcome) error {
	msg := admin.Refusal(action, o)
	switch {
	case msg == "":
		return nil
	case o.Outcome == admin.OutcomeNotFound:
		return fmt.Errorf("%w: %s", taskorch.ErrNotFound, msg)
	case o.Outcome == admin.OutcomeWrongState || o.Outcome == admin.OutcomeConflict:
		return fmt.Errorf("%w: %s", taskorch.ErrWrongState, msg)
	default:
		return errors.New(msg)
	}
}

// joinOutcomeErrors is the command's error for the tasks it could not act on: its exit code
// is the first refusal's (3 for a task that does not exist, 4 for a wrong state, 1 for a busy
// one). The messages are one a line, without the package prefix.
func joinOutcomeErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = strings.TrimPrefix(strings.TrimPrefix(e.Error(), taskorch.ErrNotFound.Error()+": "), taskorch.ErrWrongState.Error()+": ")
	}
	return &outcomeErrors{first: errs[0], msg: strings.Join(msgs, "\n")}
}

type outcomeErrors struct {
	first error
	msg   string
}

func (e *outcomeErrors) Error() string { return e.msg }
func (e *outcomeErrors) Unwrap() error { return e.first }

// runTaskActionByFilter acts on every task the filter matches, batch by batch, or counts them.
func runTaskActionByFilter(cmd *cobra.Command, g *globals, action admin.TaskAction, f taskActionFlags) error {
	now := time.Now()
	filter := admin.TaskFilter{Statuses: f.statuses, Types: f.types, IdempotencyKey: f.key}
	for _, p := range []struct {
		flag, value string
		dst         *time.Time
	}{{"since", f.since, &filter.FinishedSince}, {"until", f.until, &filter.FinishedUntil},
		{"enqueued-since", f.enqSince, &filter.EnqueuedSince}, {"enqueued-until", f.enqUntil, &filter.EnqueuedUntil}} {
		if p.value == "" {
			continue
		}
		t, err := parseWhen(p.value, now)
		if err != nil {
			return usageErrorf("--%s %q: %v", p.flag, p.value, err)
		}
		*p.dst = t
	}
	for _, s := range f.statuses {
		if !taskorch.Status(s).Valid() {
			return usageErrorf("unknown status %q (want one of %v)", s, taskorch.Statuses)
		}
	}
	if f.batch < 1 || f.batch > 1000 {
		return usageErrorf("--batch must be between 1 and 1000, got %d", f.batch)
	}
	pool, err := g.connect(cmd.Context())
	if err != nil {
		return err
	}
	defer pool.Close()
	w := cmd.OutOrStdout()
	if f.dryRun {
		n, err := admin.CountMatching(cmd.Context(), pool, action, filter)
		if err != nil {
			return mapAdminError(err)
		}
		if g.jsonOut {
			return writeJSON(w, map[string]any{"action": action, "dry_run": true, "matching": n, "filter": filter})
		}
		_, err = fmt.Fprintf(w, "would %s %s %s (dry run: nothing changed)\n", action, humanize.Thousands(n), plural(n, "task", "tasks"))
		return err
	}
	stderr := cmd.ErrOrStderr()
	progress := func(r admin.BulkResult) {
		if isTTY(stderr) && !r.Complete {
			fmt.Fprintf(stderr, "\r%s %s so far...", pastTense(action), humanize.Thousands(r.Done))
		}
	}
	res, err := admin.ActOnMatching(cmd.Context(), pool, action, filter, resolveActor(f.actor), f.reason, f.batch, progress)
	if isTTY(stderr) && res.Batches > 1 {
		fmt.Fprintln(stderr)
	}
	if err != nil && res.Batches == 0 {
		return mapAdminError(err)
	}
	if g.jsonOut {
		if werr := writeJSON(w, map[string]any{"action": action, "result": res, "filter": filter}); werr != nil {
			return werr
		}
	} else {
		fmt.Fprintf(w, "%s %s %s", pastTense(action), humanize.Thousands(res.Done), plural(res.Done, "task", "tasks"))
		if res.Skipped > 0 {
			fmt.Fprintf(w, "; %s skipped (held by another transaction, or changed meanwhile: run it again)", humanize.Thousands(res.Skipped))
		}
		fmt.Fprintln(w)
	}
	if err != nil {
		return fmt.Errorf("stopped before the end (after task %d): %w", res.LastTaskID, mapAdminError(err))
	}
	return nil
}

// parseWhen reads a point in time: a duration before now (90m, 1h30m, 7d) or a time (RFC 3339,
// 2006-01-02T15:04, 2006-01-02; UTC unless it says otherwise).
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, errors.New("a duration ago must not be negative")
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("not a duration ago (90m, 1h, 7d) or a time (2030-01-02T15:04:05Z, 2030-01-02T15:04, 2030-01-02)")
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// mapAdminError drops the sentinel's words from admin's refusals; root.go's exitCode still
// finds the sentinel (bad input 2, no such schedule or worker 3).
func mapAdminError(err error) error {
	for _, sentinel := range []error{admin.ErrInvalidInput, admin.ErrScheduleNotFound, admin.ErrWorkerNotFound, admin.ErrWorkflowNotFound} {
		if errors.Is(err, sentinel) {
			return &plainError{msg: strings.TrimPrefix(err.Error(), sentinel.Error()+": "), err: err}
		}
	}
	return err
}

// plainError is err with another message.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }

// printRunning prints the running tasks, longest-running first.
func printRunning(w io.Writer, ts []admin.RunningTask) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tWORKER\tATTEMPT\tCLAIMED AT\tRUNNING FOR\tLEASE EXPIRES")
	for _, t := range ts {
		typ := t.Type
		if t.Function != nil {
			typ += " " + *t.Function
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", t.ID, typ, deref(t.WorkerID), t.Attempt, t.MaxAttempts,
			ts2(t.ClaimedAt), humanize.Duration(humanize.FromSeconds(t.RunningSeconds)), ts2(t.LeaseExpiresAt))
	}
	return tw.Flush()
}

func ts2(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
