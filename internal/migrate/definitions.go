package migrate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// AppliedDefinition is one row of queues.schema_definition.
type AppliedDefinition struct {
	Set      string
	Path     string
	Version  int
	Checksum string
	// Migrations is how many numbered migrations of its set and the sets it builds on were
	// applied when it was.
	Migrations int
	AppliedAt  time.Time
}

// DefinitionState is where one definition file stands in a database.
type DefinitionState string

// The states of a definition (StatusOf reports them as State values of the same names).
const (
	DefPending  DefinitionState = "pending"  // never applied
	DefApplied  DefinitionState = "applied"  // applied as the file is, and no migration since
	DefModified DefinitionState = "modified" // an older version, or another text of this version, is applied
	DefStale    DefinitionState = "stale"    // applied as the file is, but a migration ran since
	DefNewer    DefinitionState = "unknown"  // a newer version is applied (by a newer taskorch)
)

// judge says where d stands, given its row (nil: none) and the current number of migrations of
// its set and the sets it builds on.
func judge(d Definition, a *AppliedDefinition, migrations int) DefinitionState {
	switch {
	case a == nil:
		return DefPending
	case a.Version > d.Version:
		return DefNewer
	case a.Version < d.Version || a.Checksum != d.Checksum:
		return DefModified
	case a.Migrations != migrations:
		return DefStale
	default:
		return DefApplied
	}
}

// needsApply reports whether a definition in state st is applied by Up.
func needsApply(st DefinitionState) bool { return st != DefApplied && st != DefNewer }

// ApplyDefinitions applies, in one transaction under the advisory lock, the function and view
// files of s that are pending, modified or stale: the functions with check_function_bodies off
// (so their order does not matter), then the views in order, then it checks every function of
// the applied files with its language's validator. It records the deletion of the files the
// set no longer has (Set.Deleted) at their deletion's version. It returns the ids of the definitions that were new or changed
// (not those only applied again after a migration). When every definition is applied it takes
// no lock and writes nothing.
func ApplyDefinitions(ctx context.Context, conn *pgx.Conn, s Set, before func(id string)) ([]string, error) {
	if len(s.Definitions) == 0 && len(s.Deleted) == 0 {
		return nil, nil
	}
	work, err := definitionWork(ctx, conn, s)
	if err != nil || work.empty() {
		return nil, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate %s definitions: %w", s.Name, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock($1)", LockKey); err != nil {
		return nil, fmt.Errorf("migrate: take advisory lock: %w", err)
	}
	if _, err := tx.Exec(ctx, bookkeepingSQL); err != nil {
		return nil, fmt.Errorf("migrate: create bookkeeping tables: %w", err)
	}
	// Again under the lock: another process may have applied them meanwhile.
	if work, err = definitionWork(ctx, tx, s); err != nil || work.empty() {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "set local check_function_bodies = off"); err != nil {
		return nil, err
	}
	var changed, functions, paths, sums []string
	var versions []int
	var text strings.Builder
	for _, d := range work.apply {
		if work.state[d.Path] != DefStale {
			changed = append(changed, d.ID())
			if before != nil {
				before(d.ID())
			}
		}
		if d.Kind == KindFunction {
			functions = append(functions, d.Object)
		}
		paths, versions, sums = append(paths, d.Path), append(versions, d.Version), append(sums, d.Checksum)
		text.WriteString(terminated(d.SQL))
	}
	if len(work.apply) > 0 {
		// One round trip for all of them; when it fails, they are applied again one by one to
		// name the file that fails.
		if _, err := tx.Exec(ctx, "savepoint taskorch_definitions"); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, text.String()); err != nil {
			return nil, applyOneByOne(ctx, tx, work.apply, err)
		}
		if _, err := tx.Exec(ctx, recordDefinitionsSQL, s.Name, paths, versions, sums, work.migrations); err != nil {
			return nil, fmt.Errorf("migrate %s definitions: record: %w", s.Name, err)
		}
	}
	for _, p := range sortedKeys(work.deleted) {
		if _, err := tx.Exec(ctx, recordDefinitionsSQL, s.Name, []string{p}, []int{work.deleted[p]}, []string{deletedMark}, work.migrations); err != nil {
			return nil, fmt.Errorf("migrate %s/%s: record the deletion: %w", s.Name, p, err)
		}
	}
	if _, err := tx.Exec(ctx, "set local check_function_bodies = on"); err != nil {
		return nil, err
	}
	if len(functions) > 0 {
		if _, err := tx.Exec(ctx, validateSQL(functions)); err != nil {
			return nil, fmt.Errorf("migrate %s definitions: a function does not compile: %w", s.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("migrate %s definitions: commit: %w", s.Name, err)
	}
	return changed, nil
}

const recordDefinitionsSQL = `insert into queues.schema_definition (migration_set, path, version, checksum, migrations)
select $1, d.path, d.version, d.checksum, $5 from unnest($2::text[], $3::integer[], $4::text[]) as d(path, version, checksum)
on conflict (migration_set, path) do update
set version = excluded.version, checksum = excluded.checksum, migrations = excluded.migrations, applied_at = now()`

// terminated returns sql followed by a line with a semicolon, so that files can be run one after
// the other in one string (an empty statement is allowed; a last statement without a semicolon,
// or a comment after it, ends there).
func terminated(sql string) string { return sql + "\n;\n" }

// applyOneByOne applies defs one at a time after the savepoint taskorch_definitions, to name the
// one that fails with the error of applying them together.
func applyOneByOne(ctx context.Context, tx pgx.Tx, defs []Definition, together error) error {
	if _, err := tx.Exec(ctx, "rollback to savepoint taskorch_definitions"); err != nil {
		return fmt.Errorf("migrate definitions: %w (and rolling back: %w)", together, err)
	}
	for _, d := range defs {
		if _, err := tx.Exec(ctx, d.SQL); err != nil {
			return fmt.Errorf("migrate %s: %w", d.ID(), err)
		}
	}
	return fmt.Errorf("migrate definitions: %w", together)
}

// validateSQL checks each function named (schema.name, every overload) with its language's
// validator, as CREATE FUNCTION does with check_function_bodies on: after all of them exist, so
// that an SQL function may call one defined in a later file. The names are identifiers checked
// by Load (defPath).
func validateSQL(objects []string) string {
	quoted := make([]string, len(objects))
	for i, o := range objects {
		quoted[i] = "'" + o + "'"
	}
	return `do $taskorch$
declare
    _f record;
begin
    for _f in
        select p.oid, l.lanvalidator::regprocedure::text as validator
        from pg_catalog.pg_proc p
        join pg_catalog.pg_namespace n on n.oid = p.pronamespace
        join pg_catalog.pg_language l on l.oid = p.prolang
        where n.nspname || '.' || p.proname = any (array[` + strings.Join(quoted, ", ") + `]::text[])
          and l.lanvalidator <> 0
        order by p.oid
    loop
        execute format('select %s(%s)', split_part(_f.validator, '(', 1), _f.oid);
    end loop;
end $taskorch$;`
}

// queryer is what definitionWork reads with: a connection or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type work struct {
	apply      []Definition
	state      map[string]DefinitionState
	deleted    map[string]int
	migrations int
}

func (w work) empty() bool { return len(w.apply) == 0 && len(w.deleted) == 0 }

// definitionWork reads what the database has applied of s and decides what to apply.
func definitionWork(ctx context.Context, q queryer, s Set) (work, error) {
	rows, migrations, err := readDefinitions(ctx, q, s)
	if err != nil {
		return work{}, err
	}
	w := work{state: map[string]DefinitionState{}, deleted: map[string]int{}, migrations: migrations}
	for _, d := range s.Definitions {
		var a *AppliedDefinition
		if r, ok := rows[d.Path]; ok {
			a = &r
		}
		st := judge(d, a, migrations)
		w.state[d.Path] = st
		if needsApply(st) {
			w.apply = append(w.apply, d)
		}
	}
	for p, v := range s.Deleted {
		if r, ok := rows[p]; !ok || r.Version < v {
			w.deleted[p] = v
		}
	}
	return w, nil
}

// readDefinitions returns the rows of queues.schema_definition of set s by path, and how many
// migrations of s and its dependencies are applied. Without the bookkeeping tables: none, 0.
func readDefinitions(ctx context.Context, q queryer, s Set) (map[string]AppliedDefinition, int, error) {
	var exists bool
	if err := q.QueryRow(ctx, "select to_regclass('queues.schema_definition') is not null").Scan(&exists); err != nil {
		return nil, 0, fmt.Errorf("migrate: read applied definitions: %w", err)
	}
	out := map[string]AppliedDefinition{}
	if !exists {
		return out, 0, nil
	}
	var migrations int
	if err := q.QueryRow(ctx, `select count(*) from queues.schema_migration where migration_set = any ($1)`,
		append([]string{s.Name}, s.Watch...)).Scan(&migrations); err != nil {
		return nil, 0, fmt.Errorf("migrate: count applied migrations: %w", err)
	}
	rows, err := q.Query(ctx, `select migration_set, path, version, checksum, migrations, applied_at
		from queues.schema_definition where migration_set = $1`, s.Name)
	if err != nil {
		return nil, 0, fmt.Errorf("migrate: read applied definitions: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanAppliedDefinition)
	if err != nil {
		return nil, 0, fmt.Errorf("migrate: read applied definitions: %w", err)
	}
	for _, a := range list {
		out[a.Path] = a
	}
	return out, migrations, nil
}

func scanAppliedDefinition(r pgx.CollectableRow) (AppliedDefinition, error) {
	var a AppliedDefinition
	err := r.Scan(&a.Set, &a.Path, &a.Version, &a.Checksum, &a.Migrations, &a.AppliedAt)
	return a, err
}

// ListAppliedDefinitions returns every row of queues.schema_definition, or none when the table
// does not exist.
func ListAppliedDefinitions(ctx context.Context, conn *pgx.Conn) ([]AppliedDefinition, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "select to_regclass('queues.schema_definition') is not null").Scan(&exists); err != nil {
		return nil, fmt.Errorf("migrate: read applied definitions: %w", err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := conn.Query(ctx, `select migration_set, path, version, checksum, migrations, applied_at
		from queues.schema_definition order by migration_set, path`)
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied definitions: %w", err)
	}
	return pgx.CollectRows(rows, scanAppliedDefinition)
}

// Judge says where d stands given the applied row a (nil when none) and the number of
// migrations of its set and the sets it builds on now applied: what CheckMigrations decides
// readiness with, from queues.applied_definitions().
func Judge(d Definition, a *AppliedDefinition, migrations int) DefinitionState {
	return judge(d, a, migrations)
}
