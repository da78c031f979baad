package migrate

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
)

// State says where one migration stands in a database.
type State string

// The states a migration can be in.
const (
	StatePending  State = "pending"  // in the binary, not applied
	StateApplied  State = "applied"  // applied, file unchanged
	StateModified State = "modified" // applied, but the file has changed since
	StateUnknown  State = "unknown"  // applied, but this binary does not know it (a newer version applied it)
)

// Status is one migration's state in a database.
type Status struct {
	Set       string
	Version   int
	Name      string
	State     State
	AppliedAt *time.Time
}

// StatusOf compares the migrations in ms with what the database on conn has applied.
func StatusOf(ctx context.Context, conn *pgx.Conn, ms []Migration) ([]Status, error) {
	applied, err := appliedMap(ctx, conn)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	sets := map[string]bool{}
	var out []Status
	for _, m := range ms {
		k := key(m.Set, m.Version)
		known[k] = true
		sets[m.Set] = true
		s := Status{Set: m.Set, Version: m.Version, Name: m.Name, State: StatePending}
		if a, ok := applied[k]; ok {
			at := a.AppliedAt
			s.AppliedAt = &at
			s.State = StateApplied
			if a.Checksum != m.Checksum {
				s.State = StateModified
			}
		}
		out = append(out, s)
	}
	list, _ := ListApplied(ctx, conn)
	for _, a := range list {
		if sets[a.Set] && !known[key(a.Set, a.Version)] {
			at := a.AppliedAt
			out = append(out, Status{Set: a.Set, Version: a.Version, Name: a.Name, State: StateUnknown, AppliedAt: &at})
		}
	}
	return out, nil
}

// WriteSQL writes a psql script that applies ms with the same bookkeeping and lock as Up, and
// skips what is already applied, so it is safe to run twice:
//
//	psql -v ON_ERROR_STOP=1 -f taskorch.sql "$DATABASE_URL"
func WriteSQL(w io.Writer, ms []Migration) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("-- taskorch migrations. Apply with: psql -v ON_ERROR_STOP=1 -f THIS_FILE \"$DATABASE_URL\"\n")
	p("-- Each migration runs in its own transaction and is skipped when already applied.\n")
	p("\\set ON_ERROR_STOP on\n\n%s\n", bookkeepingSQL)
	for _, m := range ms {
		p("\n-- ===== %s =====\n", m.ID())
		p("begin;\nselect pg_advisory_xact_lock(%d);\n", LockKey)
		p("select not exists (select 1 from queues.schema_migration where migration_set = '%s' and version = %d) as taskorch_apply \\gset\n",
			m.Set, m.Version)
		p("\\if :taskorch_apply\n%s\n", m.SQL)
		p("insert into queues.schema_migration (migration_set, version, name, checksum) values ('%s', %d, '%s', '%s');\n",
			m.Set, m.Version, m.Name, m.Checksum)
		p("\\endif\ncommit;\n")
	}
	_, err := io.WriteString(w, "")
	return err
}
