package taskorch

import (
	"context"
	"errors"
	"fmt"
	"io"

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

// MigrationStatus is one migration's state in a database.
type MigrationStatus struct {
	Set     string `json:"set"`
	Version int    `json:"version"`
	Name    string `json:"name"`
	// State is "pending", "applied", "modified" (the file changed after it was applied) or
	// "unknown" (applied by a newer taskorch).
	State     string `json:"state"`
	AppliedAt string `json:"applied_at,omitempty"`
}

// Processes are the shipped process sets, in the order they are applied, each with the sets it
// needs (installed with it).
var processSets = []struct {
	name     string
	requires []string
}{
	{"comms", nil},
	{"files", nil},
	{"accounts", []string{"files"}},
}

// ProcessSets lists the shipped business processes that MigrateOpts.Processes accepts.
func ProcessSets() []string {
	out := make([]string, len(processSets))
	for i, p := range processSets {
		out[i] = p.name
	}
	return out
}

func migrationSets(opts *MigrateOpts) ([]migrate.Migration, error) {
	want := map[string]bool{}
	if opts != nil {
		for _, p := range opts.Processes {
			if p == "core" {
				continue
			}
			known := false
			for _, ps := range processSets {
				if ps.name == p {
					known = true
					want[p] = true
					for _, r := range ps.requires {
						want[r] = true
					}
				}
			}
			if !known {
				return nil, inputErrorf("unknown process set %q (want some of %v)", p, ProcessSets())
			}
		}
	}
	sets := []string{"core"}
	for _, ps := range processSets {
		if want[ps.name] {
			sets = append(sets, ps.name)
		}
	}
	ms, err := migrate.LoadSets(migrations.FS, sets...)
	if err != nil {
		return nil, inputErrorf("%v", err)
	}
	return ms, nil
}

// Migrate applies the migrations the database lacks, in order, under an advisory lock (several
// processes may call it at once: each migration is applied once). It returns the ids of the
// migrations it applied ("core/0001_queues_schema", ...).
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
	var before func(migrate.Migration)
	if opts != nil && opts.BeforeApply != nil {
		before = func(m migrate.Migration) { opts.BeforeApply(m.ID()) }
	}
	done, err := migrate.UpNotify(ctx, conn.Conn(), ms, before)
	ids := make([]string, len(done))
	for i, m := range done {
		ids[i] = m.ID()
	}
	return ids, err
}

// MigrateStatus reports every known migration's state in the database.
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
		out[i] = MigrationStatus{Set: s.Set, Version: s.Version, Name: s.Name, State: string(s.State)}
		if s.AppliedAt != nil {
			out[i].AppliedAt = s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
		}
	}
	return out, nil
}

// MigrationSQL writes a psql script applying the migrations, for operators who apply schema
// changes by hand: psql -v ON_ERROR_STOP=1 -f taskorch.sql. It skips what is already applied.
func MigrationSQL(w io.Writer, opts *MigrateOpts) error {
	ms, err := migrationSets(opts)
	if err != nil {
		return err
	}
	return migrate.WriteSQL(w, ms)
}

// MigrationFingerprint is a checksum over the migrations opts selects; it changes whenever one
// of them does (test harnesses key their template databases on it).
func MigrationFingerprint(opts *MigrateOpts) (string, error) {
	ms, err := migrationSets(opts)
	if err != nil {
		return "", err
	}
	return migrate.Fingerprint(ms), nil
}

// ErrMigrationsPending reports a database that lacks migrations this binary has.
var ErrMigrationsPending = errors.New("taskorch: the database lacks migrations")

// CheckMigrations returns nil when every migration opts selects is applied, unchanged. It needs
// no table privilege (it calls queues.applied_migrations), so a worker running as
// worker_service_user can use it for its readiness check.
func CheckMigrations(ctx context.Context, db DBTX, opts *MigrateOpts) error {
	ms, err := migrationSets(opts)
	if err != nil {
		return err
	}
	rows, err := db.Query(ctx, `select migration_set, version, checksum from queues.applied_migrations()`)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42883" || pgErr.Code == "3F000") { // no such function or schema
			return fmt.Errorf("%w: the queues schema is not installed or predates queues.applied_migrations", ErrMigrationsPending)
		}
		return err
	}
	applied := map[string]string{}
	for rows.Next() {
		var set, sum string
		var v int
		if err := rows.Scan(&set, &v, &sum); err != nil {
			return err
		}
		applied[fmt.Sprintf("%s/%d", set, v)] = sum
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, m := range ms {
		sum, ok := applied[fmt.Sprintf("%s/%d", m.Set, m.Version)]
		switch {
		case !ok:
			return fmt.Errorf("%w: %s is not applied", ErrMigrationsPending, m.ID())
		case sum != m.Checksum:
			return fmt.Errorf("%w: %s was changed after it was applied", migrate.ErrChecksumMismatch, m.ID())
		}
	}
	return nil
}
