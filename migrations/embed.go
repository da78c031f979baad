// Package migrations holds taskorch's SQL, one folder per migration set, embedded into the
// binary: the "core" set here (the queues schema, its SQL API and the worker role), always
// applied, and the shipped business processes' sets in package processes (the folder
// processes/), which an operator opts into. A set's folder holds its numbered migrations
// (tables, types, indexes, constraints, data), one file per function and per view, edited in
// place, and definitions.sum (docs/design.md, "How the SQL is laid out"). Each file can also be
// applied by hand with `psql -f`; `taskorch migrate sql` prints them all wrapped with the
// bookkeeping `taskorch migrate up` does.
//
// Package processtest (the folder of that name, which holds no SQL) tests the processes end to
// end.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"

	"github.com/taskorch/taskorch/processes"
)

// FS holds the core set: core/NNNN_name.sql, core/functions/..., core/views/...,
// core/definitions.sum. SetFS returns any set's folder.
//
//go:embed core
var FS embed.FS

// Sets lists every migration set, in an order they can be applied in: core first, then each
// process set after the sets it needs. schema.sql (the repository's root) is the schema after
// all of them.
var Sets = []string{"core", "comms", "files", "accounts"}

// A set's place: its folder in the repository, the process sets it needs, and its history (the
// last numbered migration written before functions and views had files of their own, kept as
// it was applied).
var sets = map[string]struct {
	dir      string
	requires []string
	history  int
}{
	"core":     {"migrations/core", nil, 34},
	"comms":    {"processes/comms", nil, 9},
	"files":    {"processes/files", nil, 6},
	"accounts": {"processes/accounts", []string{"files"}, 4},
}

// SetFS returns the folder of a set as a file system: NNNN_name.sql, functions/, views/,
// definitions.sum.
func SetFS(set string) (fs.FS, error) {
	if set == "core" {
		return fs.Sub(FS, "core")
	}
	if _, ok := sets[set]; !ok {
		return nil, fmt.Errorf("unknown migration set %q (want one of %v)", set, Sets)
	}
	return fs.Sub(processes.FS, set)
}

// Dir returns the folder of a set relative to the repository's root ("migrations/core",
// "processes/comms"), for tools that write files there.
func Dir(set string) string { return sets[set].dir }

// Requires returns the process sets a process set needs installed with it ("accounts" needs
// "files"); the core set is always there.
func Requires(set string) []string { return slices.Clone(sets[set].requires) }

// Deps returns the sets whose tables a set's functions and views may read: core (for a process
// set) and the sets it requires, transitively.
func Deps(set string) []string {
	if set == "core" {
		return nil
	}
	out := []string{"core"}
	var add func(string)
	add = func(s string) {
		for _, r := range sets[s].requires {
			if !slices.Contains(out, r) {
				out = append(out, r)
				add(r)
			}
		}
	}
	add(set)
	return out
}

// Watch returns the other sets whose migrations make a set's function and view files apply
// again (docs/design.md, "How the SQL is laid out"): the sets it builds on (Deps), and the
// process sets that require it, transitively. The core set watches no other: a process set's
// migrations change only its own schema's objects.
func Watch(set string) []string {
	out := Deps(set)
	if set == "core" {
		return out
	}
	var add func(string)
	add = func(s string) {
		for _, o := range Sets {
			if slices.Contains(sets[o].requires, s) && !slices.Contains(out, o) {
				out = append(out, o)
				add(o)
			}
		}
	}
	add(set)
	return out
}

// An Amendment is an edit of a numbered migration that databases applied before it: the new
// text leaves a database as the old one did (or fails where the old one failed, with a clearer
// message). A database keeps the checksum it recorded, and the loaded migration carries that
// checksum, so that neither `taskorch migrate up` nor a worker's readiness check (of this or an
// older build) sees the edit; any other change of the file still does.
type Amendment struct {
	Version  int    // the migration's number
	File     string // hex SHA-256 of the file as it is now
	Recorded string // hex SHA-256 the databases recorded: the file as first applied
	Why      string
}

// amended lists each set's amended migrations.
var amended = map[string][]Amendment{
	"core": {{
		Version:  1,
		File:     "ed3bf6ab539ab532e5a48970c694b6dc7cc1bb7e6d92128e99af388ed7e7ceb8",
		Recorded: "642b7355031bff4ff6cb7d52e10a1a0c6083bb0d68158769a785aaa7eb307c4b",
		Why: "create worker_service_user only when it does not exist, so that a schema owner " +
			"without CREATEROLE can migrate; say which privilege is missing when it does not",
	}},
}

// Amended returns the amended migrations of a set.
func Amended(set string) []Amendment { return slices.Clone(amended[set]) }

// History returns the last numbered migration of a set that may define functions and views:
// those written before each had a file, kept byte for byte as databases applied them. Every
// later migration holds tables, types, indexes, constraints and data only.
func History(set string) int { return sets[set].history }
