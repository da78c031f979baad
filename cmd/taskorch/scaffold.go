package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch/internal/scaffold"
)

func newScaffoldCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "scaffold", Short: "Write the skeleton of something new"}
	var p scaffold.Process
	var out string
	var force bool
	process := &cobra.Command{
		Use:   "process NAME",
		Short: "Write the SQL of a new supervisor-driven process as a migration file",
		Long: `Writes the SQL of a new supervisor-driven business process, following the seven steps of
the process recipe (docs/processes.md): the root task, attempt and fact tables with their facts
helpers; an idempotent kickoff that answers validation_failure_message; a security-definer
supervisor (root row locked, exponential backoff, max attempts, re-enqueued until a terminal
fact); before/success/error handlers for a channel; grants to worker_service_user, function by
function; an instances view registered in queues.process, so that taskorch processes and the
dashboard list its instances with their state; and how to test it. TODO marks the only places
where business logic goes.

The file is named NNNN_NAME.sql with the next free number in --out, and applies with
  psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -1 -f FILE
after taskorch migrate up. --out - prints it instead.`,
		Example: `  taskorch scaffold process rebuild_summary --schema reports --key account_id
  taskorch scaffold process send_reminder --schema crm --key customer_id --channel email --out db/migrations`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("scaffold process takes one NAME, e.g. send_reminder")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			p.Name = args[0]
			sql, err := scaffold.Render(p)
			if errors.Is(err, scaffold.ErrInvalid) {
				return &usageError{err: err}
			}
			if err != nil {
				return err
			}
			if out == "-" {
				_, err := cmd.OutOrStdout().Write(sql)
				return err
			}
			path, err := nextMigrationPath(out, p.Name)
			if err != nil {
				return err
			}
			flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
			if force {
				flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			}
			f, err := os.OpenFile(path, flags, 0o644) //nolint:gosec // a source file in the user's repository, read by their tools
			if errors.Is(err, os.ErrExist) {
				return usageErrorf("%s exists; pass --force to overwrite it", path)
			}
			if err != nil {
				return err
			}
			if _, err := f.Write(sql); err != nil {
				_ = f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), path)
			return nil
		},
	}
	fl := process.Flags()
	fl.StringVar(&p.Schema, "schema", "app", "the schema the process lives in")
	fl.StringVar(&p.Key, "key", "subject_id", "the id column of the domain row the process is about (one process per key)")
	fl.StringVar(&p.Channel, "channel", "db_function", "db_function (pure SQL) or the channel task type of each attempt (email, sms, file_delete, ...)")
	fl.IntVar(&p.MaxAttempts, "max-attempts", 3, "attempts before the process gives up")
	fl.StringVar(&p.WaitSignal, "wait-signal", "", "add a wait step: after an accepted attempt, wait for this signal keyed by the process's --key value (queues.signal); a signal sent first skips the attempt; channel processes")
	fl.StringVar(&p.WaitTimeout, "wait-timeout", "", `how long the wait step waits before the process ends timed_out (not failed), e.g. "24 hours" (the default with --wait-signal)`)
	fl.StringVar(&out, "out", ".", "directory to write the migration file in, or - for standard output")
	fl.BoolVar(&force, "force", false, "overwrite an existing file")
	cmd.AddCommand(process)
	return cmd
}

var migrationFileRE = regexp.MustCompile(`^(\d+)_.*\.sql$`)

// nextMigrationPath is dir/NNNN_name.sql with NNNN one more than the highest numbered .sql file
// in dir (0001 in an empty or new directory, which it creates).
func nextMigrationPath(dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // a source directory in the user's repository
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	next := 1
	for _, e := range entries {
		if m := migrationFileRE.FindStringSubmatch(e.Name()); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n >= next {
				next = n + 1
			}
		}
	}
	return filepath.Join(dir, fmt.Sprintf("%04d_%s.sql", next, name)), nil
}
