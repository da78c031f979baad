package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
)

func newMigrateCmd(g *globals) *cobra.Command {
	var processes []string
	opts := func() *taskorch.MigrateOpts { return &taskorch.MigrateOpts{Processes: processes} }

	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, inspect or print taskorch's database migrations and function and view files",
		Long: `Apply, inspect or print taskorch's database migrations and function and view files.

The core set is always included. --processes (on every migrate command) adds shipped business
processes, comma-separated: comms, files, accounts (accounts brings files). docs/processes.md.`,
		Example: `  taskorch migrate up
  taskorch migrate up --processes comms,files,accounts
  taskorch migrate status --processes comms
  taskorch migrate sql --processes comms > taskorch.sql`,
	}
	cmd.PersistentFlags().StringSliceVar(&processes, "processes", nil,
		"also install these shipped business processes (comma-separated)")

	up := &cobra.Command{
		Use:   "up",
		Short: "Apply the migrations the database lacks, then the function and view files that changed (safe to run concurrently and repeatedly)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			mo := opts()
			if isTTY(cmd.ErrOrStderr()) {
				mo.BeforeApply = func(id string) { fmt.Fprintf(cmd.ErrOrStderr(), "applying %s ...\n", id) }
			}
			applied, err := taskorch.Migrate(cmd.Context(), pool, mo)
			if g.jsonOut {
				if applied == nil {
					applied = []string{}
				}
				if jerr := writeJSON(cmd.OutOrStdout(), map[string]any{"applied": applied}); jerr != nil {
					return jerr
				}
				return err
			}
			for _, id := range applied {
				fmt.Fprintln(cmd.OutOrStdout(), "applied", id)
			}
			if err == nil && len(applied) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "up to date")
			}
			return err
		},
	}
	addJSONFlag(up, g)

	status := &cobra.Command{
		Use:   "status",
		Short: "Show which migrations and function and view files are applied, pending or changed",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			st, err := taskorch.MigrateStatus(cmd.Context(), pool, opts())
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MIGRATION OR FILE\tVERSION\tSTATE\tAPPLIED AT")
			for _, s := range st {
				v := "-"
				if s.Kind != "migration" {
					v = strconv.Itoa(s.Version)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, v, s.State, dash(s.AppliedAt))
			}
			return tw.Flush()
		},
	}
	addJSONFlag(status, g)

	sql := &cobra.Command{
		Use:   "sql",
		Short: "Print the migrations and function and view files as one psql script (psql -v ON_ERROR_STOP=1 -f)",
		Long: `Prints every migration and every function and view file as a psql script for operators who
apply schema changes by hand:

  taskorch migrate sql > taskorch.sql
  psql -v ON_ERROR_STOP=1 -f taskorch.sql "$DATABASE_URL"

The script records what it applies exactly as 'migrate up' does and skips what is already
applied (a function or view file: when it is applied as it is and no migration ran since, or a
newer version of it is), so running it twice is harmless. It needs no database connection.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return taskorch.MigrationSQL(cmd.OutOrStdout(), opts())
		},
	}
	cmd.AddCommand(up, status, sql)
	return cmd
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
