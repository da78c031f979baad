// Package migrate applies taskorch's numbered SQL migrations: in order, once, under a PostgreSQL
// advisory lock so that two processes starting together cannot race, recording what it applied
// (with a checksum) in queues.schema_migration.
package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// LockKey is the advisory lock key every migration transaction holds (pg_advisory_xact_lock;
// "taskorch" in ASCII).
const LockKey int64 = 0x7461736b6f726368

// bookkeepingSQL creates the table that records applied migrations. It is idempotent.
const bookkeepingSQL = `create schema if not exists queues;
create table if not exists queues.schema_migration (
    migration_set text        not null,
    version       integer     not null,
    name          text        not null,
    checksum      text        not null,
    applied_at    timestamptz not null default now(),
    primary key (migration_set, version)
);`

// Migration is one numbered SQL file of a migration set.
type Migration struct {
	Set      string // the migration set, e.g. "core"
	Version  int    // from the file name's number
	Name     string // the file name without number and extension
	SQL      string
	Checksum string // hex SHA-256 of SQL
}

// ID names the migration as set/NNNN_name.
func (m Migration) ID() string { return fmt.Sprintf("%s/%04d_%s", m.Set, m.Version, m.Name) }

var fileName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// Load reads the migrations of one set from fsys (files <set>/NNNN_name.sql), sorted by version.
func Load(fsys fs.FS, set string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, set)
	if err != nil {
		return nil, fmt.Errorf("migration set %q: %w", set, err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration set %q: file %q is not named NNNN_name.sql", set, e.Name())
		}
		body, err := fs.ReadFile(fsys, path.Join(set, e.Name()))
		if err != nil {
			return nil, err
		}
		v, _ := strconv.Atoi(m[1])
		sum := sha256.Sum256(body)
		out = append(out, Migration{Set: set, Version: v, Name: m[2], SQL: string(body), Checksum: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migration set %q: two files numbered %04d", set, out[i].Version)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("migration set %q has no migrations", set)
	}
	return out, nil
}

// LoadSets loads several sets, in the order given.
func LoadSets(fsys fs.FS, sets ...string) ([]Migration, error) {
	var all []Migration
	for _, s := range sets {
		ms, err := Load(fsys, s)
		if err != nil {
			return nil, err
		}
		all = append(all, ms...)
	}
	return all, nil
}

// Fingerprint is a checksum over a list of migrations: it changes when any of them changes.
func Fingerprint(ms []Migration) string {
	h := sha256.New()
	for _, m := range ms {
		fmt.Fprintf(h, "%s:%s\n", m.ID(), m.Checksum)
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

// Up applies, on conn, every migration in ms not yet applied, in order, each in its own
// transaction together with its bookkeeping row. Each of those transactions takes the advisory
// lock (pg_advisory_xact_lock) and checks again that its migration is still missing, so
// concurrent callers apply each migration once. The lock is a transaction's, never the
// session's, so Up works through a transaction-pooling proxy too (PgBouncer in transaction
// mode), where consecutive transactions may run on different server connections. It returns
// the migrations it applied.
func Up(ctx context.Context, conn *pgx.Conn, ms []Migration) ([]Migration, error) {
	return UpNotify(ctx, conn, ms, nil)
}

// UpNotify is Up that calls before(m), when not nil, just before applying each migration m.
func UpNotify(ctx context.Context, conn *pgx.Conn, ms []Migration, before func(Migration)) ([]Migration, error) {
	// Without the lock first: when everything is applied (every start of every process), the
	// run takes no lock and writes nothing.
	applied, err := appliedMap(ctx, conn)
	if err != nil {
		return nil, err
	}
	var done []Migration
	for _, m := range ms {
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
			done = append(done, m)
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
func applyOne(ctx context.Context, conn *pgx.Conn, m Migration, before func(Migration)) (ran bool, err error) {
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
		before(m)
	}
	// No arguments: pgx sends the file with the simple protocol, so it may hold many statements.
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
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
