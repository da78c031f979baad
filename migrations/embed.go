// Package migrations holds taskorch's SQL: numbered migration files, one folder per migration
// set, embedded into the binary. Each file can also be applied by hand with `psql -f`;
// `taskorch migrate sql` prints them wrapped with the bookkeeping `taskorch migrate up` does.
//
// The "core" set (the queues schema, its SQL API and the worker role) is always applied. Later
// sets are business processes an operator opts into; package processtest (the folder of that
// name, which holds no SQL) tests them end to end.
package migrations

import "embed"

// FS holds every migration set: <set>/<NNNN>_<name>.sql (core, comms, files, accounts).
//
//go:embed */*.sql
var FS embed.FS

// Sets lists every migration set in FS, in an order they can be applied in: core first, then
// each process set after the sets it needs. schema.sql (the repository's root) is the schema
// after all of them.
var Sets = []string{"core", "comms", "files", "accounts"}
