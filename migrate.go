package taskorch

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/internal/migrate"
	"github.com/taskorch/taskorch/migrations"
)

// MigrateOpts selects what Migrate applies. The zero value applies the core schema only.
type MigrateOpts struct {
	// Processes are optional migration sets of shipped business processes to install as well,
	// e.g. "comms", "files", "accounts". The core set is always applied first.
	Processes []string
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

func migrationSets(opts *MigrateOpts) ([]migrate.Migration, error) {
	sets := []string{"core"}
	if opts != nil {
		for _, p := range opts.Processes {
			if p == "core" || slices.Contains(sets, p) {
				continue
			}
			sets = append(sets, p)
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
	done, err := migrate.Up(ctx, conn.Conn(), ms)
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
