package dashboard

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A process is a supervisor-driven business process, found in the catalog by the naming
// pattern of the process building blocks (docs/processes.md): in a schema S, a root table
// S.<name>_task (primary key <name>_task_id) with at least one of
//
//	S.<name>_attempt            (<name>_attempt_id, <name>_task_id)
//	S.<name>_attempt_succeeded  (<name>_attempt_id)
//	S.<name>_attempt_failed     (<name>_attempt_id, error_message)
//	S.<name>_task_succeeded     (<name>_task_id)
//	S.<name>_task_failed        (<name>_task_id, error_message)
//	S.<name>_task_timed_out     (<name>_task_id, reason): a wait step's signal did not come in time
//
// Processes written by `taskorch scaffold process` follow it, so they show up without
// configuration. Schema, table and column names come from the catalog and are only ever put
// into SQL quoted (pgx.Identifier.Sanitize).
type process struct {
	Schema string
	Name   string

	Root          relation
	Attempt       *relation
	AttemptOK     *relation
	AttemptFailed *relation
	TaskOK        *relation
	TaskFailed    *relation
	TaskTimedOut  *relation // a process with a wait step (docs/processes.md, "Outcomes")
}

// relation is a table found in the catalog, with its columns.
type relation struct {
	Table    string
	Columns  []string
	Readable bool // the dashboard's role may SELECT it
}

func (r *relation) has(col string) bool { return r != nil && slices.Contains(r.Columns, col) }

// ID is the process's name in URLs: schema.name.
func (p process) ID() string { return p.Schema + "." + p.Name }

// ident quotes a table of the process's schema for SQL.
func (p process) ident(table string) string { return pgx.Identifier{p.Schema, table}.Sanitize() }

func (p process) taskPK() string    { return p.Name + "_task_id" }
func (p process) attemptPK() string { return p.Name + "_attempt_id" }

// col quotes a column name.
func col(name string) string { return pgx.Identifier{name}.Sanitize() }

// processCatalogSQL lists the tables that may belong to processes, with their columns, in
// every schema but the system's and taskorch's own.
const processCatalogSQL = `
select n.nspname::text, c.relname::text,
       array(select a.attname::text from pg_catalog.pg_attribute a
             where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped order by a.attnum),
       pg_catalog.has_table_privilege(c.oid, 'select')
from pg_catalog.pg_class c
join pg_catalog.pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'p')
  and n.nspname not in ('queues', 'internal', 'pg_catalog', 'information_schema')
  and n.nspname !~ '^pg_'
  and c.relname ~ '_(task|attempt|attempt_succeeded|attempt_failed|task_succeeded|task_failed|task_timed_out)$'
order by 1, 2`

// processCacheTTL is how long the catalog's answer is reused.
const processCacheTTL = 30 * time.Second

// processes returns the processes in the database, from a cache refreshed every
// processCacheTTL.
func (h *Handler) processes(ctx context.Context, tx pgx.Tx) ([]process, error) {
	h.procMu.Lock()
	defer h.procMu.Unlock()
	if h.procCache != nil && time.Since(h.procAt) < processCacheTTL {
		return h.procCache, nil
	}
	rows, err := tx.Query(ctx, processCatalogSQL)
	if err != nil {
		return nil, err
	}
	type key struct{ schema, table string }
	tables := map[key]relation{}
	var order []key
	for rows.Next() {
		var k key
		var r relation
		if err := rows.Scan(&k.schema, &k.table, &r.Columns, &r.Readable); err != nil {
			rows.Close()
			return nil, err
		}
		r.Table = k.table
		tables[k] = r
		order = append(order, k)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := []process{}
	for _, k := range order {
		name, ok := strings.CutSuffix(k.table, "_task")
		if !ok || name == "" {
			continue
		}
		root := tables[k]
		p := process{Schema: k.schema, Name: name, Root: root}
		if !root.has(p.taskPK()) {
			continue
		}
		sib := func(suffix string, cols ...string) *relation {
			r, ok := tables[key{k.schema, name + suffix}]
			if !ok || !r.Readable {
				return nil
			}
			for _, c := range cols {
				if !r.has(c) {
					return nil
				}
			}
			return &r
		}
		p.Attempt = sib("_attempt", p.attemptPK(), p.taskPK())
		if p.Attempt != nil {
			p.AttemptOK = sib("_attempt_succeeded", p.attemptPK())
			p.AttemptFailed = sib("_attempt_failed", p.attemptPK())
		}
		p.TaskOK = sib("_task_succeeded", p.taskPK())
		p.TaskFailed = sib("_task_failed", p.taskPK())
		p.TaskTimedOut = sib("_task_timed_out", p.taskPK())
		if p.Attempt == nil && p.TaskOK == nil && p.TaskFailed == nil {
			continue // a table that merely ends in _task
		}
		out = append(out, p)
	}
	h.procCache, h.procAt = out, time.Now()
	return out, nil
}

// findProcess returns the process named schema.name.
func (h *Handler) findProcess(ctx context.Context, tx pgx.Tx, id string) (process, error) {
	ps, err := h.processes(ctx, tx)
	if err != nil {
		return process{}, err
	}
	for _, p := range ps {
		if p.ID() == id {
			if !p.Root.Readable {
				return p, userError{status: 403, msg: "the dashboard's database role may not read " + p.ident(p.Root.Table)}
			}
			return p, nil
		}
	}
	return process{}, notFoundf("no process %q (a process is a table <schema>.<name>_task with <name>_attempt and facts tables)", truncate(80, id))
}
