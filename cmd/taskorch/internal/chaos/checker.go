package chaos

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed checks.sql
var checksSQL string

// Kinds of check.
const (
	KindLost        = "lost"        // something that should exist does not
	KindDuplicate   = "duplicate"   // something happened twice, or under a stale lease
	KindUnexplained = "unexplained" // a failure with no recorded reason
	KindInfo        = "info"        // counted and shown, never a failure
)

// sampleSize is how many ids a failed check shows.
const sampleSize = 5

// check is one query of checks.sql.
type check struct {
	name, kind, what, sql string
}

// parseChecks reads checks.sql: blocks that start with "-- check: NAME KIND", then a comment
// line saying what the check finds, then the query.
func parseChecks(src string) ([]check, error) {
	var out []check
	var cur *check
	for line := range strings.SplitSeq(src, "\n") {
		if rest, ok := strings.CutPrefix(line, "-- check: "); ok {
			f := strings.Fields(rest)
			if len(f) != 2 {
				return nil, fmt.Errorf("checks.sql: bad header %q", line)
			}
			switch f[1] {
			case KindLost, KindDuplicate, KindUnexplained, KindInfo:
			default:
				return nil, fmt.Errorf("checks.sql: check %s has unknown kind %q", f[0], f[1])
			}
			out = append(out, check{name: f[0], kind: f[1]})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil {
			continue
		}
		if c, ok := strings.CutPrefix(line, "-- "); ok && cur.sql == "" {
			cur.what = strings.TrimSpace(cur.what + " " + c)
			continue
		}
		if strings.TrimSpace(line) != "" {
			cur.sql += line + "\n"
		}
	}
	for _, c := range out {
		if c.what == "" || strings.TrimSpace(c.sql) == "" {
			return nil, fmt.Errorf("checks.sql: check %s needs a description and a query", c.name)
		}
	}
	return out, nil
}

// Expected is what the producer enqueued, as the harness counted it.
type Expected struct {
	// GoTasks and DBFunctionTasks are the workload's tasks (idempotency keys chaos-g*, chaos-d*).
	GoTasks, DBFunctionTasks int
	// EmailProcesses is the number of email processes started (chaos.email_request).
	EmailProcesses int
	// Workflows is the number of workflows (diamonds and chains of tasks that wait for one
	// another; their first node's idempotency key is chaos-w*.a).
	Workflows int
	// DurableWorkflows is the number of durable Go workflows (chaos.durable, idempotency keys
	// chaos-f*).
	DurableWorkflows int
}

// Total is the number of workload items.
func (e Expected) Total() int {
	return e.GoTasks + e.DBFunctionTasks + e.EmailProcesses + e.Workflows + e.DurableWorkflows
}

// CheckResult is the outcome of one check.
type CheckResult struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	What    string   `json:"what"`
	Count   int64    `json:"count"`
	Samples []string `json:"samples,omitempty"`
}

// Result is what Check found.
type Result struct {
	// Tasks is every row of queues.task (the workload, its children, and every supervisor,
	// wake-up and email task of the processes), by status.
	Tasks    int64            `json:"tasks"`
	ByStatus map[string]int64 `json:"by_status"`
	// Found is the workload as found in the database.
	Found Expected `json:"found"`
	// Expected is what the producer enqueued.
	Expected Expected `json:"expected"`
	// EmailsSent and EmailsGaveUp count the email processes' terminal facts.
	EmailsSent, EmailsGaveUp int64
	// Checks are the checks of checks.sql, in order.
	Checks []CheckResult `json:"checks"`
}

// count returns a check's count (0 when unknown).
func (r *Result) count(name string) int64 {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Count
		}
	}
	return 0
}

// missingWorkload is how many enqueued workload items the database does not have.
func (r *Result) missingWorkload() int64 {
	return int64(max(0, r.Expected.GoTasks-r.Found.GoTasks) +
		max(0, r.Expected.DBFunctionTasks-r.Found.DBFunctionTasks) +
		max(0, r.Expected.EmailProcesses-r.Found.EmailProcesses) +
		max(0, r.Expected.Workflows-r.Found.Workflows) +
		max(0, r.Expected.DurableWorkflows-r.Found.DurableWorkflows))
}

func (r *Result) sum(kind string) int64 {
	var n int64
	for _, c := range r.Checks {
		if c.Kind == kind {
			n += c.Count
		}
	}
	return n
}

// Lost counts what should exist and does not: workload items missing, tasks not terminal,
// effects, children and process outcomes missing.
func (r *Result) Lost() int64 { return r.sum(KindLost) + r.missingWorkload() }

// Duplicates counts what happened twice: tasks completed twice or under a stale lease, effects
// and children applied twice, email processes with two successes or two terminal facts.
func (r *Result) Duplicates() int64 { return r.sum(KindDuplicate) }

// Unexplained counts failures with no recorded reason.
func (r *Result) Unexplained() int64 { return r.sum(KindUnexplained) }

// OK reports whether nothing was lost, duplicated or left unexplained.
func (r *Result) OK() bool { return r.Lost() == 0 && r.Duplicates() == 0 && r.Unexplained() == 0 }

// Querier runs queries: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check proves from the database alone, after the queue drained, that nothing was lost and
// nothing happened twice (checks.sql), and compares the workload found with exp.
func Check(ctx context.Context, db Querier, exp Expected) (*Result, error) {
	checks, err := parseChecks(checksSQL)
	if err != nil {
		return nil, err
	}
	r := &Result{Expected: exp, ByStatus: map[string]int64{}}
	rows, err := db.Query(ctx, `select status::text, count(*) from queues.task group by 1`)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return nil, err
		}
		r.ByStatus[s] = n
		r.Tasks += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	if err := db.QueryRow(ctx, `
		select count(*) filter (where idempotency_key like 'chaos-g%'),
		       count(*) filter (where idempotency_key like 'chaos-d%'),
		       (select count(*) from chaos.email_request),
		       (select count(*) from comms.send_email_task_succeeded s join chaos.email_request r using (send_email_task_id)),
		       (select count(*) from comms.send_email_task_failed f join chaos.email_request r using (send_email_task_id)),
		       count(*) filter (where idempotency_key like 'chaos-w%.a'),
		       count(*) filter (where idempotency_key like 'chaos-f%')
		from queues.task where idempotency_key like 'chaos-%'`).Scan(
		&r.Found.GoTasks, &r.Found.DBFunctionTasks, &r.Found.EmailProcesses, &r.EmailsSent, &r.EmailsGaveUp, &r.Found.Workflows,
		&r.Found.DurableWorkflows); err != nil {
		return nil, fmt.Errorf("count the workload: %w", err)
	}
	for _, c := range checks {
		res := CheckResult{Name: c.name, Kind: c.kind, What: c.what}
		// The query is one of checks.sql's, embedded: static SQL.
		q := `select count(*), coalesce((array_agg(x::text order by x::text))[1:` + fmt.Sprint(sampleSize) + `], '{}')
		      from (` + strings.TrimRight(strings.TrimSpace(c.sql), ";") + `) s(x)`
		if err := db.QueryRow(ctx, q).Scan(&res.Count, &res.Samples); err != nil {
			return nil, fmt.Errorf("check %s: %w", c.name, err)
		}
		r.Checks = append(r.Checks, res)
	}
	return r, nil
}
