package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// exitCodes is documented in docs/cli.md and by `taskorch --help`.
const exitCodes = `| code | meaning |
|---|---|
| 0 | success |
| 1 | failure: the database is unreachable, a provider or migration failed, ... |
| 2 | usage: a bad flag, argument, payload or timestamp |
| 3 | not found: no task with that id, no schedule with that name |
| 4 | wrong state: the task's status forbids the operation (e.g. retrying a running task) |
`

// writeCLIDoc writes docs/cli.md from the commands' own help: every command, its usage line,
// description, examples and flags. TestCLIDoc keeps the file in sync.
func writeCLIDoc(w io.Writer, root *cobra.Command) error {
	var b strings.Builder
	b.WriteString("# The taskorch command\n\n")
	b.WriteString("<!-- Generated from the commands' help by `go test ./cmd/taskorch -run TestCLIDoc -update`; do not edit. -->\n\n")
	b.WriteString(root.Long + "\n\n")
	b.WriteString("Every listing takes `--json`: one JSON document on standard output, for scripts. Errors go to\nstandard error, and the exit code says what happened:\n\n")
	b.WriteString(exitCodes + "\n")
	b.WriteString("## Commands\n\n")
	var walk func(c *cobra.Command, depth int)
	var all []*cobra.Command
	walk = func(c *cobra.Command, depth int) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			all = append(all, sub)
			fmt.Fprintf(&b, "%s- [`%s`](#%s) — %s\n", strings.Repeat("  ", depth), sub.CommandPath(), anchor(sub.CommandPath()), sub.Short)
			walk(sub, depth+1)
		}
	}
	walk(root, 0)
	b.WriteString("\n")
	for _, c := range all {
		fmt.Fprintf(&b, "## %s\n\n", c.CommandPath())
		desc := c.Long
		if desc == "" {
			desc = c.Short
		}
		b.WriteString(strings.TrimSpace(desc) + "\n\n")
		if c.Runnable() {
			fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
		}
		if c.Example != "" {
			fmt.Fprintf(&b, "Examples:\n\n```\n%s\n```\n\n", strings.TrimRight(c.Example, "\n"))
		}
		if fl := c.NonInheritedFlags(); c.Runnable() && fl.HasAvailableFlags() {
			fmt.Fprintf(&b, "Flags:\n\n```\n%s```\n\n", fl.FlagUsages())
		}
		// Flags a parent command gives all its subcommands (migrate's --processes), which
		// NonInheritedFlags leaves out; the root's are the global flags below.
		for p := c.Parent(); c.Runnable() && p != nil && p != root; p = p.Parent() {
			if fl := p.PersistentFlags(); fl.HasAvailableFlags() {
				fmt.Fprintf(&b, "Flags of every `%s` command:\n\n```\n%s```\n\n", p.CommandPath(), fl.FlagUsages())
			}
		}
	}
	fmt.Fprintf(&b, "## Global flags\n\n```\n%s```\n", root.PersistentFlags().FlagUsages())
	_, err := io.WriteString(w, b.String())
	return err
}

func anchor(s string) string { return strings.ReplaceAll(strings.ToLower(s), " ", "-") }
