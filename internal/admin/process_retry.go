package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotRetryable is returned by RetryProcessInstance for an instance that is not failed
// (running, waiting or succeeded), or of a process that cannot be retried by hand.
var ErrNotRetryable = errors.New("process instance cannot be retried")

// ErrInvalidReason is returned by RetryProcessInstance when the reason is empty or too long.
var ErrInvalidReason = errors.New("invalid retry reason")

// ProcessRestart is a restart of a failed instance by hand: the fact
// <schema>.<name>_task_restarted (docs/processes.md, "Retrying a failed process").
type ProcessRestart struct {
	Process     string    `json:"process"`
	ID          int64     `json:"instance_id"`
	Run         int       `json:"run"` // the run the restart started: 2 for the first restart
	Reason      string    `json:"reason"`
	RestartedAt time.Time `json:"restarted_at"`
	RestartedBy string    `json:"restarted_by"`
}

// RetryProcessInstance restarts failed instance id of process ("schema.name") through
// queues.retry_process, recording reason. Refusals, with the database's message:
// ErrInvalidReason (no reason), ErrProcessNotFound, ErrInstanceNotFound, ErrNotRetryable (not
// failed, or the process has no retry function). Nothing is written then.
func RetryProcessInstance(ctx context.Context, db DB, process string, id int64, reason string) (*ProcessRestart, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, fmt.Errorf("%w: a reason is required (it is recorded with the restart)", ErrInvalidReason)
	}
	var r ProcessRestart
	err := db.QueryRow(ctx, `select process, instance_id, run, reason, restarted_at, restarted_by
		from queues.retry_process($1, $2, $3)`, process, id, reason).
		Scan(&r.Process, &r.ID, &r.Run, &r.Reason, &r.RestartedAt, &r.RestartedBy)
	if err == nil {
		return &r, nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg := pgErr.Message
		switch pgErr.Code {
		case "22023":
			return nil, fmt.Errorf("%w: %s", ErrInvalidReason, msg)
		case "42704":
			return nil, fmt.Errorf("%w: %s", ErrProcessNotFound, msg)
		case "P0002":
			return nil, fmt.Errorf("%w: %s", ErrInstanceNotFound, msg)
		case "55000", "0A000":
			return nil, fmt.Errorf("%w: %s", ErrNotRetryable, msg)
		}
	}
	return nil, fmt.Errorf("retry %s %d: %w", truncate(process, 120), id, err)
}

// readRestarts reads the instance's restart facts and the failed facts of its runs, when the
// process can be retried (its <name>_task_restarted table exists). Names come from the
// registry, quoted; the id is a parameter.
func readRestarts(ctx context.Context, db DB, p registered, id int64, d *ProcessDetail) error {
	var ok bool
	if err := db.QueryRow(ctx, `select to_regclass($1) is not null and exists (
			select 1 from pg_catalog.pg_attribute a where a.attrelid = to_regclass($2) and a.attname = 'run' and not a.attisdropped)`,
		p.ident(p.Name+"_task_restarted"), p.ident(p.Name+"_task_failed")).Scan(&ok); err != nil {
		return fmt.Errorf("read restarts: %w", err)
	}
	if !ok {
		return nil
	}
	tid := pgx.Identifier{p.Name + "_task_id"}.Sanitize()
	rows, err := db.Query(ctx, `select run, reason, restarted_at, restarted_by from `+p.ident(p.Name+"_task_restarted")+`
		where `+tid+` = $1 order by run`, id)
	if err != nil {
		return fmt.Errorf("read restarts: %w", err)
	}
	d.Restarts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProcessRestart, error) {
		x := ProcessRestart{Process: p.Schema + "." + p.Name, ID: id}
		err := r.Scan(&x.Run, &x.Reason, &x.RestartedAt, &x.RestartedBy)
		return x, err
	})
	if err != nil {
		return fmt.Errorf("read restarts: %w", err)
	}
	if len(d.Restarts) == 0 {
		return nil
	}
	// The failures of the runs before the last restart: facts that stay, no longer terminal.
	rows, err = db.Query(ctx, `select run, created_at, error_message from `+p.ident(p.Name+"_task_failed")+`
		where `+tid+` = $1 and run < $2 order by run`, id, d.Restarts[len(d.Restarts)-1].Run)
	if err != nil {
		return fmt.Errorf("read earlier failures: %w", err)
	}
	d.EarlierFailures, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProcessRunFailure, error) {
		var x ProcessRunFailure
		err := r.Scan(&x.Run, &x.At, &x.Error)
		return x, err
	})
	if err != nil {
		return fmt.Errorf("read earlier failures: %w", err)
	}
	return nil
}

// ProcessRunFailure is the terminal failure of a run that was restarted afterwards.
type ProcessRunFailure struct {
	Run   int       `json:"run"`
	At    time.Time `json:"at"`
	Error string    `json:"error"`
}

// ProcessRestarts is what an instance's page shows of retrying it by hand.
type ProcessRestarts struct {
	Retryable       bool // the process registered a retry function
	Restarts        []ProcessRestart
	EarlierFailures []ProcessRunFailure
}

// ReadProcessRestarts returns whether process ("schema.name") can be retried by hand, and
// instance id's restarts and the failures of its restarted runs. ErrProcessNotFound for a
// process the registry does not list.
func ReadProcessRestarts(ctx context.Context, db DB, process string, id int64) (*ProcessRestarts, error) {
	p, err := lookupProcess(ctx, db, process)
	if err != nil {
		return nil, err
	}
	out := &ProcessRestarts{}
	if err := db.QueryRow(ctx, `select retry_function is not null from queues.process where process = $1`, process).Scan(&out.Retryable); err != nil {
		return nil, fmt.Errorf("read the registry: %w", err)
	}
	var d ProcessDetail
	if err := readRestarts(ctx, db, p, id, &d); err != nil {
		return nil, err
	}
	out.Restarts, out.EarlierFailures = d.Restarts, d.EarlierFailures
	return out, nil
}
