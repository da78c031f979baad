package main

import (
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

func newTasksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tasks", Short: "List, show, retry, cancel and delete tasks"}

	var (
		statuses []string
		types    []string
		limit    int
		before   int64
		longest  bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first (--longest: the running tasks that have run longest)",
		Long: `List tasks, newest first, a page of --limit at a time (--before continues).

--longest lists the running tasks instead, those that have run longest in their current attempt
first, with their worker, attempt, when they were claimed, how long they have run and when their
lease expires: where to look for a stuck task (docs/operations.md, "Runbook"). It takes --type
and --limit.`,
		Example: `  taskorch tasks list --status dead --type email
  taskorch tasks list --longest --limit 10`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if longest {
				return listLongest(cmd, g, types, limit, statuses, before)
			}
			p := &taskorch.ListParams{Types: types, Limit: limit, Before: before}
			for _, s := range statuses {
				p.Statuses = append(p.Statuses, taskorch.Status(s))
			}
			c, closeFn, err := g.readClient(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := c.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			for _, t := range res.Tasks {
				maskTask(t)
			}
			if g.jsonOut {
				if res.Tasks == nil {
					res.Tasks = []*taskorch.Task{}
				}
				return writeJSON(cmd.OutOrStdout(), map[string]any{"tasks": res.Tasks, "next": res.Next})
			}
			return printTaskTable(cmd.OutOrStdout(), res)
		},
	}
	list.Flags().StringSliceVar(&statuses, "status", nil, "only these statuses (waiting,pending,running,completed,failed,dead,cancelled)")
	list.Flags().StringSliceVar(&types, "type", nil, "only these task types (or one SQL function's queue, db_function:<schema.function>)")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many tasks")
	list.Flags().Int64Var(&before, "before", 0, "continue a listing: tasks with an id below this")
	list.Flags().BoolVar(&longest, "longest", false, "the running tasks, longest-running first, with worker, attempt, claimed at and lease expiry")
	addJSONFlag(list, g)

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a task with its lease, event and error timeline",
		Long: `Show a task with its lease, event and error timeline. Secrets in its payload, result and
errors are masked as on the dashboard, in the table and in --json alike (docs/security.md,
"Secrets on pages, in listings and in logs"); the database keeps them as written.`,
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
			t, err := c.Get(cmd.Context(), id)
			if err != nil {
				return err
			}
			h, err := c.History(cmd.Context(), id)
			if err != nil {
				return err
			}
			maskTask(t)
			maskHistory(h)
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"task": t, "history": h})
			}
			return printTask(cmd.OutOrStdout(), t, h)
		},
	}
	addJSONFlag(show, g)

	retry := newTaskActionCmd(g, admin.ActionRetry)
	cancel := newTaskActionCmd(g, admin.ActionCancel)
	del := newTaskActionCmd(g, admin.ActionDelete)

	cmd.AddCommand(list, show, retry, cancel, del)
	return cmd
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageErrorf("task id must be a positive integer, got %q", s)
	}
	return id, nil
}

func printTaskTable(w io.Writer, l *taskorch.TaskList) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tATTEMPT\tPRIORITY\tRUN AT\tLAST ERROR")
	for _, t := range l.Tasks {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", t.ID, t.Label(), t.Outcome(), t.Attempt, t.MaxAttempts,
			t.Priority, t.RunAt.UTC().Format(time.RFC3339), short(deref(t.LastError), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.Next != 0 {
		_, err := fmt.Fprintf(w, "more: --before %d\n", l.Next)
		return err
	}
	return nil
}

func printTask(w io.Writer, t *taskorch.Task, h *taskorch.History) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("task", strconv.FormatInt(t.ID, 10))
	row("type", t.Label())
	row("status", t.Outcome())
	row("attempt", fmt.Sprintf("%d of %d", t.Attempt, t.MaxAttempts))
	row("priority", strconv.Itoa(t.Priority))
	row("idempotency key", deref(t.IdempotencyKey))
	row("scheduled at", ts(&t.ScheduledAt))
	row("enqueued at", ts(&t.EnqueuedAt))
	row("run at", ts(&t.RunAt))
	if len(t.ParentIDs) > 0 {
		ids := make([]string, len(t.ParentIDs))
		for i, p := range t.ParentIDs {
			ids[i] = strconv.FormatInt(p, 10)
		}
		row("after", strings.Join(ids, ", "))
	}
	if t.WorkflowID != nil {
		row("workflow", strconv.FormatInt(*t.WorkflowID, 10))
	}
	if t.LeaseID != nil {
		row("lease", fmt.Sprintf("%d (worker %s, expires %s)", *t.LeaseID, deref(t.WorkerID), ts(t.LeaseExpiresAt)))
	}
	if t.CallFailure != nil {
		row("call error", deref(t.LastError)) // the error its channel call failed with
	} else {
		row("last error", deref(t.LastError))
	}
	row("payload", string(t.Payload))
	if t.Result != nil {
		row("result", string(t.Result))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nleases:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  LEASE\tATTEMPT\tWORKER\tLEASED AT\tEXPIRES AT")
	for _, l := range h.Leases {
		fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%s\n", l.ID, l.Attempt, deref(l.WorkerID), ts(&l.LeasedAt), ts(&l.ExpiresAt))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nevents:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tEVENT\tFROM\tTO\tLEASE\tWORKER\tBY\tDETAIL")
	for _, e := range h.Events {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ts(&e.OccurredAt), e.Event, derefS(e.FromStatus), derefS(e.ToStatus),
			derefI(e.LeaseID), deref(e.WorkerID), deref(e.Actor), short(deref(e.Detail), 60))
	}
	_ = tw.Flush()
	if len(h.Steps) > 0 {
		fmt.Fprintln(w, "\nworkflow steps:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tKIND\tNAME\tATTEMPT\tCOMPLETED AT\tWAKE AT\tRESULT")
		for _, st := range h.Steps {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\t%s\t%s\n", st.Position, st.Kind, st.Name, st.Attempt, ts(&st.CompletedAt),
				ts(st.WakeAt), short(string(st.Result), 60))
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w, "\nerrors:")
	for _, e := range h.Errors {
		fmt.Fprintf(w, "  %s  %s\n", ts(&e.OccurredAt), short(e.Message, 200))
	}
	if len(h.Errors) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	return nil
}

func ts(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func deref(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func derefS(s *taskorch.Status) string {
	if s == nil {
		return "-"
	}
	return string(*s)
}

func derefI(i *int64) string {
	if i == nil {
		return "-"
	}
	return strconv.FormatInt(*i, 10)
}

func short(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func bytesReader(s string) io.Reader { return strings.NewReader(s) }

// listLongest lists the running tasks, longest-running first.
func listLongest(cmd *cobra.Command, g *globals, types []string, limit int, statuses []string, before int64) error {
	if len(statuses) > 0 || before != 0 {
		return usageErrorf("--longest lists running tasks: it takes --type and --limit, not --status or --before")
	}
	for _, t := range types {
		if err := taskorch.ValidateTaskType(t); err != nil {
			return &usageError{err: err}
		}
	}
	pool, err := g.connectRead(cmd.Context(), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer pool.Close()
	ts, err := admin.RunningLongest(cmd.Context(), pool, limit, types)
	if err != nil {
		return mapAdminError(err)
	}
	if g.jsonOut {
		if ts == nil {
			ts = []admin.RunningTask{}
		}
		return writeJSON(cmd.OutOrStdout(), map[string]any{"running": ts})
	}
	return printRunning(cmd.OutOrStdout(), ts)
}
