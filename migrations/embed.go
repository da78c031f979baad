// Package migrations holds taskorch's SQL: numbered migration files, one folder per migration
// set, embedded into the binary. Each file can also be applied by hand with `psql -f`;
// `taskorch migrate sql` prints them wrapped with the bookkeeping `taskorch migrate up` does.
//
// The "core" set (the queues schema, its SQL API and the worker role) is always applied. Later
// sets are business processes an operator opts into.
package migrations

import "embed"

// FS holds every migration set: <set>/<NNNN>_<name>.sql (core, comms, files, accounts).
//
//go:embed */*.sql
var FS embed.FS
