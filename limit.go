package taskorch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Limit is the flow control of one task type, a row of queues.task_limit: how many of its tasks
// may run at once and how fast they may be claimed, across every worker. The claim enforces
// it (docs/limits.md).
type Limit struct {
	TaskType string `json:"task_type"`
	// MaxRunning: at most this many tasks of the type running at once; 0 means no such limit.
	MaxRunning int `json:"max_running,omitempty"`
	// RatePerSecond: at most this many claims per second, with bursts of up to Burst (a token
	// bucket kept in the database); 0 means no rate limit.
	RatePerSecond float64 `json:"rate_per_second,omitempty"`
	Burst         int     `json:"burst,omitempty"`
	// KeyField, when set, is a top-level payload field: MaxRunning and RatePerSecond then hold
	// per distinct value of it. A task whose field is missing, null, an object or an array
	// counts in one more bucket, the null-key bucket.
	KeyField  string    `json:"key_field,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// String describes the limit in words, as the CLI and the dashboard show it: "at most 4
// running, 2/s (burst 10) per tenant".
func (l Limit) String() string {
	var parts []string
	if l.MaxRunning > 0 {
		parts = append(parts, fmt.Sprintf("at most %d running", l.MaxRunning))
	}
	if l.RatePerSecond > 0 {
		parts = append(parts, fmt.Sprintf("%s/s (burst %d)", strconv.FormatFloat(l.RatePerSecond, 'f', -1, 64), l.Burst))
	}
	s := strings.Join(parts, ", ")
	if l.KeyField != "" {
		s += " per " + l.KeyField
	}
	return s
}

// LimitParams sets the limit of a task type for SetLimit. At least one of MaxRunning and
// RatePerSecond is required.
type LimitParams struct {
	// TaskType is the limited type. It need not have tasks yet. "db_function:schema.name"
	// limits the db_function tasks of that one SQL function (docs/limits.md).
	TaskType string
	// MaxRunning, when above 0, caps the tasks of the type running at once.
	MaxRunning int
	// RatePerSecond, when above 0, caps the claims per second; Burst (0: 1) is how many may be
	// claimed at once after a quiet spell.
	RatePerSecond float64
	Burst         int
	// KeyField makes the limit apply per value of this top-level payload field ("account_id",
	// "tenant"): a plain identifier.
	KeyField string
}

// LimitUsage is one bucket of a limit in use, a row of the view queues.limit_status.
type LimitUsage struct {
	Limit
	// Key is the bucket's key value; empty for a limit without a key field and for the
	// null-key bucket (NullKey).
	Key     string `json:"key,omitempty"`
	NullKey bool   `json:"null_key,omitempty"`
	// Running is how many of the bucket's tasks run now; Held how many due tasks wait for it.
	Running int64 `json:"running"`
	Held    int64 `json:"held"`
	// Tokens is the bucket's tokens now (rate limits only; nil otherwise).
	Tokens *float64 `json:"tokens,omitempty"`
}

// SetLimit creates or replaces the limit of p.TaskType. A bad value (a limit of 0 or less, a
// burst without a rate, a key field that is not a plain identifier) is ErrInvalidInput and
// nothing is written. Setting a limit, or changing its key field, briefly holds new tasks of
// every type while the tasks of the type get their buckets (docs/limits.md).
func (c *Client) SetLimit(ctx context.Context, p *LimitParams) error {
	return c.setLimit(ctx, c.pool, p)
}

// SetLimitTx is SetLimit in the caller's transaction: the limit holds when tx commits.
func (c *Client) SetLimitTx(ctx context.Context, tx pgx.Tx, p *LimitParams) error {
	return c.setLimit(ctx, tx, p)
}

func (c *Client) setLimit(ctx context.Context, db DBTX, p *LimitParams) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	if p == nil {
		return inputErrorf("SetLimit needs a *LimitParams")
	}
	if p.MaxRunning < 0 || p.RatePerSecond < 0 || p.Burst < 0 {
		return inputErrorf("limit of %q: MaxRunning, RatePerSecond and Burst must not be negative", p.TaskType)
	}
	_, err := db.Exec(ctx, `select queues.set_limit($1, $2, $3, $4, $5)`,
		p.TaskType, zeroNil(p.MaxRunning), zeroNil(p.RatePerSecond), zeroNil(p.Burst), zeroNil(p.KeyField))
	if err != nil {
		return fmt.Errorf("set limit of %q: %w", p.TaskType, mapError(err))
	}
	return nil
}

// RemoveLimit lifts the limit of taskType: its tasks are claimed freely again. A type without
// a limit is ErrNotFound.
func (c *Client) RemoveLimit(ctx context.Context, taskType string) error {
	return c.removeLimit(ctx, c.pool, taskType)
}

// RemoveLimitTx is RemoveLimit in the caller's transaction.
func (c *Client) RemoveLimitTx(ctx context.Context, tx pgx.Tx, taskType string) error {
	return c.removeLimit(ctx, tx, taskType)
}

func (c *Client) removeLimit(ctx context.Context, db DBTX, taskType string) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	var removed bool
	if err := db.QueryRow(ctx, `select queues.remove_limit($1)`, taskType).Scan(&removed); err != nil {
		return fmt.Errorf("remove limit of %q: %w", taskType, mapError(err))
	}
	if !removed {
		return &notFoundError{msg: fmt.Sprintf("task type %q has no limit", taskType)}
	}
	return nil
}

// Limits lists the limits, by task type. It reads queues.task_limit: an operator's role needs
// SELECT on it (docs/security.md).
func (c *Client) Limits(ctx context.Context) ([]Limit, error) {
	return c.limits(ctx, c.pool)
}

// LimitsTx is Limits in the caller's transaction.
func (c *Client) LimitsTx(ctx context.Context, tx pgx.Tx) ([]Limit, error) {
	return c.limits(ctx, tx)
}

func (c *Client) limits(ctx context.Context, db DBTX) ([]Limit, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
		select task_type, coalesce(max_running, 0), coalesce(rate_per_second, 0),
		       case when rate_per_second is null then 0 else burst end, coalesce(key_field, ''),
		       created_at, updated_at
		from queues.task_limit order by task_type`)
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", mapError(err))
	}
	ls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Limit, error) {
		var l Limit
		err := r.Scan(&l.TaskType, &l.MaxRunning, &l.RatePerSecond, &l.Burst, &l.KeyField, &l.CreatedAt, &l.UpdatedAt)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", mapError(err))
	}
	return ls, nil
}

// LimitUsage reads queues.limit_status: each limit and each of its buckets in use, with its
// running and held-back tasks and its tokens. A limit with nothing in use has one row with
// neither Key nor NullKey.
func (c *Client) LimitUsage(ctx context.Context) ([]LimitUsage, error) {
	return c.limitUsage(ctx, c.pool)
}

// LimitUsageTx is LimitUsage in the caller's transaction.
func (c *Client) LimitUsageTx(ctx context.Context, tx pgx.Tx) ([]LimitUsage, error) {
	return c.limitUsage(ctx, tx)
}

func (c *Client) limitUsage(ctx context.Context, db DBTX) ([]LimitUsage, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
		select s.task_type, coalesce(s.max_running, 0), coalesce(s.rate_per_second, 0), coalesce(s.burst, 0),
		       coalesce(s.key_field, ''), l.created_at, l.updated_at,
		       coalesce(s.key, ''), s.null_key, s.running, s.held, s.tokens
		from queues.limit_status s join queues.task_limit l using (task_type)
		order by s.task_type, s.null_key, s.key`)
	if err != nil {
		return nil, fmt.Errorf("limit usage: %w", mapError(err))
	}
	us, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LimitUsage, error) {
		var u LimitUsage
		err := r.Scan(&u.TaskType, &u.MaxRunning, &u.RatePerSecond, &u.Burst, &u.KeyField, &u.CreatedAt, &u.UpdatedAt,
			&u.Key, &u.NullKey, &u.Running, &u.Held, &u.Tokens)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("limit usage: %w", mapError(err))
	}
	return us, nil
}

// zeroNil is nil for a zero value (SQL NULL: the default), else v.
func zeroNil[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}
