package taskorch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/migrations"
)

// MigrateOpts selects what Migrate applies. The zero value applies the core schema only.
type MigrateOpts struct {
	// Processes are optional migration sets of shipped business processes to install as well,
	// of ProcessSets: "comms", "files", "accounts" (which brings "files"). The core set is
	// always applied first.
	Processes []string

	// BeforeApply, when set, is called with a migration's id ("core/0001_queues_schema") just
	// before Migrate applies it: for progress reports.
	BeforeApply func(id string)
}

// MigrationStatus is the state of one migration, or of one function or view file, in a
// database (docs/design.md, "How the SQL is laid out").
type MigrationStatus struct {
	Set string `json:"set"`
	// Kind is "migration", "function" or "view".
	Kind string `json:"kind"`
	// ID names it: "core/0001_queues_schema", "core/functions/queues/claim_tasks.sql".
	ID string `json:"id"`
	// Version is a migration's number, or a function or view file's version (definitions.sum).
	Version int `json:"version"`
	// Name is a migration's name, or the function or view a file defines ("queues.claim_tasks").
	Name string `json:"name"`
	// State is "pending", "applied", "modified" (the file changed after it was applied; a
	// function or view file is applied again by the next migrate), "stale" (a function or view
	// file applied as it is, but a migration ran since: applied again by the next migrate) or
	// "unknown" (applied by a newer taskorch).
	State     string `json:"state"`
	AppliedAt string `json:"applied_at,omitempty"`
}

// processSets are the shipped process sets, in the order they are applied.
var processSets = migrations.Sets[1:]

// ProcessSets lists the shipped business processes that MigrateOpts.Processes accepts.
func ProcessSets() []string {
	return slices.Clone(processSets)
}

func migrationSets(opts *MigrateOpts) ([]migrate.Set, error) {
	want := map[string]bool{}
	if opts != nil {
		for _, p := range opts.Processes {
			if p == "core" {
				continue
			}
			if !slices.Contains(processSets, p) {
				return nil, inputErrorf("unknown process set %q (want some of %v)", p, ProcessSets())
			}
			want[p] = true
			for _, r := range migrations.Deps(p) {
				want[r] = true
			}
		}
	}
	sets := []string{"core"}
	for _, ps := range processSets {
		if want[ps] {
			sets = append(sets, ps)
		}
	}
	ms, err := migrate.Shipped(sets...)
	if err != nil {
		return nil, inputErrorf("%v", err)
	}
	return ms, nil
}

// Migrate applies what the database lacks, under an advisory lock (several processes may call
// it at once: each thing is applied once): each set's numbered migrations, in order, then its
// function and view files that are new, changed, or older than a migration applied since
// (docs/design.md, "How the SQL is laid out"). It returns the ids of the migrations it applied
// ("core/0001_queues_schema", ...) and of the function and view files that were new or changed
// ("core/functions/queues/claim_tasks.sql", ...). A function or view file that a newer taskorch
// applied is left as it is.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *MigrateOpts) ([]string, error) {
	ms, err := migrationSets(opts)
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	var before func(string)
	if opts != nil && opts.BeforeApply != nil {
		before = opts.BeforeApply
	}
	return migrate.UpNotify(ctx, conn.Conn(), ms, before)
}

// MigrateStatus reports the state of every known migration and function and view file in the
// database, and of those a newer taskorch applied ("unknown").
func MigrateStatus(ctx context.Context, pool *pgxpool.Pool, opts *MigrateOpts) ([]MigrationStatus, error) {
	ms, err := migrationSets(opts)
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate status: %w", err)
	}
	defer conn.Release()
	st, err := migrate.StatusOf(ctx, conn.Conn(), ms)
	if err != nil {
		return nil, err
	}
	out := make([]MigrationStatus, len(st))
	for i, s := range st {
		out[i] = MigrationStatus{Set: s.Set, Kind: s.Kind, ID: s.ID, Version: s.Version, Name: s.Name, State: string(s.State)}
		if s.AppliedAt != nil {
			out[i].AppliedAt = s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
		}
	}
	return out, nil
}

// MigrationSQL writes a psql script applying the migrations and the function and view files,
// for operators who apply schema changes by hand: psql -v ON_ERROR_STOP=1 -f taskorch.sql. It
// records what it applies as Migrate does and skips what is already applied.
func MigrationSQL(w io.Writer, opts *MigrateOpts) error {
	ms, err := migrationSets(opts)
	if err != nil {
		return err
	}
	return migrate.WriteSQL(w, ms)
}

// MigrationFingerprint is a checksum over the migrations and the function and view files opts
// selects; it changes whenever one of them does (test harnesses key their template databases on it).
func MigrationFingerprint(opts *MigrateOpts) (string, error) {
	ms, err := migrationSets(opts)
	if err != nil {
		return "", err
	}
	return migrate.Fingerprint(ms), nil
}

// ErrMigrationsPending reports a database that lacks migrations this binary has.
var ErrMigrationsPending = errors.New("taskorch: the database lacks migrations")

// CheckMigrations returns nil when every migration opts selects is applied, unchanged, and
// every function and view file is applied as it is (or a newer version of it is). It needs no
// table privilege (it calls queues.applied_migrations and queues.applied_definitions), so a
// worker running as worker_service_user can use it for its readiness check.
func CheckMigrations(ctx context.Context, db DBTX, opts *MigrateOpts) error {
	sets, err := migrationSets(opts)
	if err != nil {
		return err
	}
	rows, err := db.Query(ctx, `select migration_set, version, checksum from queues.applied_migrations()`)
	if err != nil {
		if missingFunction(err) {
			return fmt.Errorf("%w: the queues schema is not installed or predates queues.applied_migrations", ErrMigrationsPending)
		}
		return err
	}
	applied := map[string]string{}
	perSet := map[string]int{}
	for rows.Next() {
		var set, sum string
		var v int
		if err := rows.Scan(&set, &v, &sum); err != nil {
			return err
		}
		applied[fmt.Sprintf("%s/%d", set, v)] = sum
		perSet[set]++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range sets {
		for _, m := range s.Migrations {
			sum, ok := applied[fmt.Sprintf("%s/%d", m.Set, m.Version)]
			switch {
			case !ok:
				return fmt.Errorf("%w: %s is not applied", ErrMigrationsPending, m.ID())
			case sum != m.Checksum:
				return fmt.Errorf("%w: %s was changed after it was applied", migrate.ErrChecksumMismatch, m.ID())
			}
		}
	}
	defs, err := db.Query(ctx, `select migration_set, path, version, checksum, migrations from queues.applied_definitions()`)
	if err != nil {
		if missingFunction(err) {
			return fmt.Errorf("%w: the database predates the function and view files (queues.applied_definitions)", ErrMigrationsPending)
		}
		return err
	}
	rowsOf := map[string]migrate.AppliedDefinition{}
	for defs.Next() {
		var a migrate.AppliedDefinition
		if err := defs.Scan(&a.Set, &a.Path, &a.Version, &a.Checksum, &a.Migrations); err != nil {
			return err
		}
		rowsOf[a.Set+"/"+a.Path] = a
	}
	if err := defs.Err(); err != nil {
		return err
	}
	for _, s := range sets {
		count := perSet[s.Name]
		for _, d := range s.Watch {
			count += perSet[d]
		}
		for _, d := range s.Definitions {
			var a *migrate.AppliedDefinition
			if r, ok := rowsOf[d.ID()]; ok {
				a = &r
			}
			switch st := migrate.Judge(d, a, count); st {
			case migrate.DefApplied, migrate.DefNewer:
			default:
				return fmt.Errorf("%w: %s is %s", ErrMigrationsPending, d.ID(), st)
			}
		}
	}
	return nil
}

// missingFunction reports an error of a function or schema that does not exist.
func missingFunction(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42883" || pgErr.Code == "3F000")
}
