package migrate

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// State says where one migration or definition stands in a database.
type State string

// The states a migration or definition can be in.
const (
	StatePending  State = "pending"  // in the binary, not applied
	StateApplied  State = "applied"  // applied, file unchanged
	StateModified State = "modified" // applied, but the file has changed since (a definition: applied again by the next migrate)
	StateStale    State = "stale"    // a definition applied as it is, but a migration ran since: applied again by the next migrate
	StateUnknown  State = "unknown"  // applied, but this binary does not know it or has an older version (a newer taskorch applied it)
)

// Status is one migration's or definition's state in a database.
type Status struct {
	Set string
	// Kind is "migration", "function" or "view".
	Kind string
	// ID is Migration.ID or Definition.ID.
	ID string
	// Version is a migration's number, or a definition's version (the binary's, or for an
	// unknown one the database's).
	Version int
	// Name is a migration's name, or a definition's object (schema.name).
	Name      string
	State     State
	AppliedAt *time.Time
}

// StatusOf compares the sets with what the database on conn has applied.
func StatusOf(ctx context.Context, conn *pgx.Conn, sets []Set) ([]Status, error) {
	applied, err := appliedMap(ctx, conn)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	inSets := map[string]bool{}
	var out []Status
	for _, s := range sets {
		inSets[s.Name] = true
		for _, m := range s.Migrations {
			k := key(m.Set, m.Version)
			known[k] = true
			st := Status{Set: m.Set, Kind: "migration", ID: m.ID(), Version: m.Version, Name: m.Name, State: StatePending}
			if a, ok := applied[k]; ok {
				at := a.AppliedAt
				st.AppliedAt = &at
				st.State = StateApplied
				if a.Checksum != m.Checksum {
					st.State = StateModified
				}
			}
			out = append(out, st)
		}
	}
	list, err := ListApplied(ctx, conn)
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		if inSets[a.Set] && !known[key(a.Set, a.Version)] {
			at := a.AppliedAt
			out = append(out, Status{Set: a.Set, Kind: "migration", ID: fmt.Sprintf("%s/%04d_%s", a.Set, a.Version, a.Name),
				Version: a.Version, Name: a.Name, State: StateUnknown, AppliedAt: &at})
		}
	}
	for _, s := range sets {
		rows, migrations, err := readDefinitions(ctx, conn, s)
		if err != nil {
			return nil, err
		}
		mine := map[string]bool{}
		for _, d := range s.Definitions {
			mine[d.Path] = true
			st := Status{Set: s.Name, Kind: string(d.Kind), ID: d.ID(), Version: d.Version, Name: d.Object}
			var a *AppliedDefinition
			if r, ok := rows[d.Path]; ok {
				a = &r
				at := r.AppliedAt
				st.AppliedAt = &at
			}
			st.State = State(judge(d, a, migrations))
			out = append(out, st)
		}
		for p, a := range rows {
			if v, gone := s.Deleted[p]; mine[p] || (gone && a.Version <= v) || a.Checksum == deletedMark {
				continue
			}
			at := a.AppliedAt
			kind, object := "function", p
			if m := defPath.FindStringSubmatch(p); m != nil {
				kind, object = strings.TrimSuffix(m[1], "s"), m[2]+"."+m[3]
			}
			out = append(out, Status{Set: s.Name, Kind: kind, ID: s.Name + "/" + p, Version: a.Version, Name: object,
				State: StateUnknown, AppliedAt: &at})
		}
	}
	return out, nil
}

// WriteSQL writes a psql script that applies the sets with the same bookkeeping and lock as
// Up: each migration in its own transaction, skipped when already applied; then each set's
// function and view files in one transaction, each skipped when applied as it is and no
// migration ran since, or when a newer version is applied. It is safe to run twice:
//
//	psql -v ON_ERROR_STOP=1 -f taskorch.sql "$DATABASE_URL"
func WriteSQL(w io.Writer, sets []Set) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("-- taskorch migrations. Apply with: psql -v ON_ERROR_STOP=1 -f THIS_FILE \"$DATABASE_URL\"\n")
	p("-- Each set's numbered migrations run in their own transactions, skipped when already applied;\n")
	p("-- then its function and view files, in one transaction, each skipped when already applied as it is.\n")
	p("\\set ON_ERROR_STOP on\n\n%s\n", bookkeepingSQL)
	for _, s := range sets {
		for _, m := range s.Migrations {
			p("\n-- ===== %s =====\n", m.ID())
			p("begin;\nselect pg_advisory_xact_lock(%d);\n", LockKey)
			p("select not exists (select 1 from queues.schema_migration where migration_set = '%s' and version = %d) as taskorch_apply \\gset\n",
				m.Set, m.Version)
			p("\\if :taskorch_apply\n%s\n", m.Body)
			p("insert into queues.schema_migration (migration_set, version, name, checksum) values ('%s', %d, '%s', '%s');\n",
				m.Set, m.Version, m.Name, m.Checksum)
			p("\\endif\ncommit;\n")
		}
		if len(s.Definitions) == 0 && len(s.Deleted) == 0 {
			continue
		}
		sets := append([]string{s.Name}, s.Watch...)
		p("\n-- ===== %s: function and view files =====\n", s.Name)
		p("begin;\nselect pg_advisory_xact_lock(%d);\n", LockKey)
		p("select count(*) as taskorch_migrations from queues.schema_migration where migration_set in ('%s') \\gset\n", strings.Join(sets, "', '"))
		p("set local check_function_bodies = off;\n")
		var functions []string
		for _, d := range s.Definitions {
			p("\n-- ----- %s (version %d) -----\n", d.ID(), d.Version)
			p("select not exists (select 1 from queues.schema_definition d where d.migration_set = '%s' and d.path = '%s'\n", d.Set, d.Path)
			p("    and (d.version > %d or (d.version = %d and d.checksum = '%s' and d.migrations = :taskorch_migrations))) as taskorch_apply \\gset\n",
				d.Version, d.Version, d.Checksum)
			p("\\if :taskorch_apply\n%s\n", strings.TrimRight(d.SQL, "\n"))
			p("insert into queues.schema_definition (migration_set, path, version, checksum, migrations)\nvalues ('%s', '%s', %d, '%s', :taskorch_migrations)\n",
				d.Set, d.Path, d.Version, d.Checksum)
			p("on conflict (migration_set, path) do update\nset version = excluded.version, checksum = excluded.checksum, migrations = excluded.migrations, applied_at = now();\n")
			p("\\endif\n")
			if d.Kind == KindFunction {
				functions = append(functions, d.Object)
			}
		}
		for _, path := range sortedKeys(s.Deleted) {
			p("insert into queues.schema_definition (migration_set, path, version, checksum, migrations)\nvalues ('%s', '%s', %d, '%s', :taskorch_migrations)\n",
				s.Name, path, s.Deleted[path], deletedMark)
			p("on conflict (migration_set, path) do update\nset version = excluded.version, checksum = excluded.checksum, migrations = excluded.migrations, applied_at = now()\n")
			p("where queues.schema_definition.version < excluded.version;\n")
		}
		p("\nset local check_function_bodies = on;\n")
		if len(functions) > 0 {
			p("%s\n", validateSQL(functions))
		}
		p("commit;\n")
	}
	_, err := io.WriteString(w, "")
	return err
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
