// Package migrate applies taskorch's SQL (docs/design.md, "How the SQL is laid out"): each
// set's numbered migrations in order, once, and then its function and view files, re-applied
// whenever one changes or a migration ran, all under a PostgreSQL advisory lock so that two
// processes starting together cannot race. It records what it applied, with checksums, in
// queues.schema_migration and queues.schema_definition.
package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// LockKey is the advisory lock key every migration transaction holds (pg_advisory_xact_lock;
// "taskorch" in ASCII).
const LockKey int64 = 0x7461736b6f726368

// bookkeepingSQL creates the tables that record applied migrations and definitions. It is
// idempotent.
const bookkeepingSQL = `create schema if not exists queues;
create table if not exists queues.schema_migration (
    migration_set text        not null,
    version       integer     not null,
    name          text        not null,
    checksum      text        not null,
    applied_at    timestamptz not null default now(),
    primary key (migration_set, version)
);
create table if not exists queues.schema_definition (
    migration_set text        not null,
    path          text        not null,
    version       integer     not null,
    checksum      text        not null,
    migrations    integer     not null,
    applied_at    timestamptz not null default now(),
    primary key (migration_set, path)
);
comment on table queues.schema_definition is 'The function and view files applied (docs/design.md, "How the SQL is laid out"): version and checksum of each, and how many migrations of its set and the sets it builds on were applied then (a migration since makes it apply again).';`

// Fingerprint is a checksum over sets: it changes when any migration or definition changes.
func Fingerprint(sets []Set) string {
	h := sha256.New()
	for _, s := range sets {
		fmt.Fprintf(h, "set %s %v\n", s.Name, s.Watch)
		for _, m := range s.Migrations {
			fmt.Fprintf(h, "%s:%s\n", m.ID(), m.Checksum)
		}
		for _, d := range s.Definitions {
			fmt.Fprintf(h, "%s:%s\n", d.ID(), d.Checksum)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Applied is one row of queues.schema_migration.
type Applied struct {
	Set       string
	Version   int
	Name      string
	Checksum  string
	AppliedAt time.Time
}

// ErrChecksumMismatch reports a migration whose file changed after it was applied.
var ErrChecksumMismatch = errors.New("migration changed after it was applied")

// Up applies, on conn, each set in order: its numbered migrations not yet applied, in order, each
// in its own transaction together with its bookkeeping row; then, in one transaction, its
// function and view files that are new, changed, or older than a migration applied since
// (ApplyDefinitions). Each of those transactions takes the advisory lock
// (pg_advisory_xact_lock) and checks again what is missing, so concurrent callers apply each
// thing once. The lock is a transaction's, never the session's, so Up works through a
// transaction-pooling proxy too (PgBouncer in transaction mode), where consecutive transactions
// may run on different server connections. It returns the ids of the migrations it applied and
// of the definitions that were new or changed (Migration.ID, Definition.ID), in order.
func Up(ctx context.Context, conn *pgx.Conn, sets []Set) ([]string, error) {
	return UpNotify(ctx, conn, sets, nil)
}

// UpNotify is Up that calls before(id), when not nil, just before applying each migration and
// each new or changed definition.
func UpNotify(ctx context.Context, conn *pgx.Conn, sets []Set, before func(id string)) ([]string, error) {
	// Without the lock first: when everything is applied (every start of every process), the
	// run takes no lock and writes nothing.
	applied, err := appliedMap(ctx, conn)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, s := range sets {
		for _, m := range s.Migrations {
			if a, ok := applied[key(m.Set, m.Version)]; ok {
				if err := sameChecksum(m, a); err != nil {
					return done, err
				}
				continue
			}
			ran, err := applyOne(ctx, conn, m, before)
			if err != nil {
				return done, err
			}
			if ran {
				done = append(done, m.ID())
			}
		}
		ids, err := ApplyDefinitions(ctx, conn, s, before)
		done = append(done, ids...)
		if err != nil {
			return done, err
		}
	}
	// A set's definitions apply again after a migration of a set built on it (Set.Watch), which
	// ran after them: once more, what is stale now (usually nothing, at the cost of a read).
	for _, s := range sets {
		ids, err := ApplyDefinitions(ctx, conn, s, before)
		done = append(done, ids...)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

func sameChecksum(m Migration, a Applied) error {
	if a.Checksum == m.Checksum {
		return nil
	}
	return fmt.Errorf("%w: %s (applied %s, checksum %.12s, file now %.12s); write a new migration instead of editing an applied one",
		ErrChecksumMismatch, m.ID(), a.AppliedAt.Format(time.RFC3339), a.Checksum, m.Checksum)
}

// applyOne applies m in one transaction under the advisory lock, unless another process applied
// it meanwhile; ran reports whether this call applied it.
func applyOne(ctx context.Context, conn *pgx.Conn, m Migration, before func(string)) (ran bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate %s: %w", m.ID(), err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock($1)", LockKey); err != nil {
		return false, fmt.Errorf("migrate: take advisory lock: %w", err)
	}
	if _, err := tx.Exec(ctx, bookkeepingSQL); err != nil {
		return false, fmt.Errorf("migrate: create bookkeeping table: %w", err)
	}
	var a Applied
	err = tx.QueryRow(ctx, `select checksum, applied_at from queues.schema_migration
		where migration_set = $1 and version = $2`, m.Set, m.Version).Scan(&a.Checksum, &a.AppliedAt)
	switch {
	case err == nil: // applied by another process while this one waited for the lock
		return false, sameChecksum(m, a)
	case !errors.Is(err, pgx.ErrNoRows):
		return false, fmt.Errorf("migrate: read applied migrations: %w", err)
	}
	if before != nil {
		before(m.ID())
	}
	// No arguments: pgx sends the file with the simple protocol, so it may hold many statements.
	if _, err := tx.Exec(ctx, m.Body); err != nil {
		return false, fmt.Errorf("migrate %s: %w", m.ID(), err)
	}
	if _, err := tx.Exec(ctx,
		"insert into queues.schema_migration (migration_set, version, name, checksum) values ($1, $2, $3, $4)",
		m.Set, m.Version, m.Name, m.Checksum); err != nil {
		return false, fmt.Errorf("migrate %s: record: %w", m.ID(), err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("migrate %s: commit: %w", m.ID(), err)
	}
	return true, nil
}

func key(set string, version int) string { return set + "/" + strconv.Itoa(version) }

func appliedMap(ctx context.Context, conn *pgx.Conn) (map[string]Applied, error) {
	list, err := ListApplied(ctx, conn)
	if err != nil {
		return nil, err
	}
	m := make(map[string]Applied, len(list))
	for _, a := range list {
		m[key(a.Set, a.Version)] = a
	}
	return m, nil
}

// ListApplied returns the applied migrations, or none when the bookkeeping table does not exist.
func ListApplied(ctx context.Context, conn *pgx.Conn) ([]Applied, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "select to_regclass('queues.schema_migration') is not null").Scan(&exists); err != nil {
		return nil, fmt.Errorf("migrate: read applied migrations: %w", err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := conn.Query(ctx, `select migration_set, version, name, checksum, applied_at
		from queues.schema_migration order by migration_set, version`)
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied migrations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Applied, error) {
		var a Applied
		err := r.Scan(&a.Set, &a.Version, &a.Name, &a.Checksum, &a.AppliedAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied migrations: %w", err)
	}
	return out, nil
}
