// Package orders is a small service built on taskorch, as a Go team would write one, using only
// taskorch's public packages: an HTTP handler that records an order and enqueues its charge in
// the same transaction (EnqueueTx), typed handlers that use SetResult, Snooze and Discard, a Wait
// for the charge's result, and a graceful shutdown (Run). Its tests (orders_test.go) use package
// taskorchtest and goleak; docs/testing.md walks through them.
package orders

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
)

// Schema is the service's own table, beside taskorch's schema.
const Schema = `create table if not exists orders (
	id           bigint generated always as identity primary key,
	customer     text   not null,
	amount_cents bigint not null,
	status       text   not null default 'new',
	receipt      text
)`

// Migrate applies taskorch's migrations and the service's table.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := taskorch.Migrate(ctx, pool, nil); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, Schema)
	return err
}

// ChargeOrder charges an order's customer: the task enqueued with the order.
type ChargeOrder struct {
	OrderID     int64  `json:"order_id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// TaskType names the task.
func (ChargeOrder) TaskType() string { return "orders.charge" }

// Charged is a charge's result (SetResult): what Wait returns with the completed task.
type Charged struct {
	Receipt string `json:"receipt"`
}

// Gateway is the payment service the charge calls.
type Gateway interface {
	// Charge charges customer; ErrDeclined and ErrBusy are its answers besides a receipt.
	Charge(ctx context.Context, customer string, cents int64) (receipt string, err error)
}

var (
	// ErrDeclined is the gateway's answer for a declined card: retrying cannot help.
	ErrDeclined = errors.New("card declined")
	// ErrBusy is the gateway's answer when it asks to be called again later.
	ErrBusy = errors.New("gateway busy")
)

// BusyRetry is how long a charge waits when the gateway is busy (a snooze, no attempt spent).
const BusyRetry = 30 * time.Second

// Service is the orders service: its pool, its taskorch client and its gateway.
type Service struct {
	Pool    *pgxpool.Pool
	Client  *taskorch.Client
	Gateway Gateway
}

// Order is a row of orders.
type Order struct {
	ID          int64   `json:"id"`
	Customer    string  `json:"customer"`
	AmountCents int64   `json:"amount_cents"`
	Status      string  `json:"status"`
	Receipt     *string `json:"receipt,omitempty"`
}

// CreateOrder records an order and enqueues its charge in tx, the caller's transaction: both
// commit, or neither does. It returns the order's id and the charge's task id.
func (s *Service) CreateOrder(ctx context.Context, tx pgx.Tx, customer string, cents int64) (orderID, taskID int64, err error) {
	if customer == "" || cents <= 0 {
		return 0, 0, fmt.Errorf("an order needs a customer and a positive amount, got %q and %d", customer, cents)
	}
	if err := tx.QueryRow(ctx, `insert into orders (customer, amount_cents) values ($1, $2) returning id`, customer, cents).
		Scan(&orderID); err != nil {
		return 0, 0, fmt.Errorf("record the order: %w", err)
	}
	res, err := s.Client.EnqueueTx(ctx, tx, ChargeOrder{OrderID: orderID, Customer: customer, AmountCents: cents},
		&taskorch.EnqueueOpts{IdempotencyKey: "charge-" + strconv.FormatInt(orderID, 10), MaxAttempts: 5})
	if err != nil {
		return 0, 0, fmt.Errorf("enqueue the charge: %w", err)
	}
	return orderID, res.TaskID, nil
}

// Get reads order id.
func (s *Service) Get(ctx context.Context, id int64) (*Order, error) {
	var o Order
	err := s.Pool.QueryRow(ctx, `select id, customer, amount_cents, status, receipt from orders where id = $1`, id).
		Scan(&o.ID, &o.Customer, &o.AmountCents, &o.Status, &o.Receipt)
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// Charge is ChargeOrder's handler: it calls the gateway, marks the order paid with its receipt,
// and sets the receipt as the task's result. A declined card fails the task for good (Discard)
// and marks the order declined; a busy gateway snoozes it; any other error is retried.
func (s *Service) Charge(ctx context.Context, t *taskorch.TaskFor[ChargeOrder]) error {
	receipt, err := s.Gateway.Charge(ctx, t.Args.Customer, t.Args.AmountCents)
	switch {
	case errors.Is(err, ErrBusy):
		return taskorch.Snooze(BusyRetry)
	case errors.Is(err, ErrDeclined):
		if _, err := s.Pool.Exec(ctx, `update orders set status = 'declined' where id = $1`, t.Args.OrderID); err != nil {
			return err
		}
		return taskorch.Discard(fmt.Errorf("order %d: %w", t.Args.OrderID, err))
	case err != nil:
		return fmt.Errorf("order %d: charge: %w", t.Args.OrderID, err)
	}
	if _, err := s.Pool.Exec(ctx, `update orders set status = 'paid', receipt = $2 where id = $1`, t.Args.OrderID, receipt); err != nil {
		return err
	}
	return taskorch.SetResult(ctx, Charged{Receipt: receipt})
}

// Handlers returns the service's task handlers.
func (s *Service) Handlers() *taskorch.Handlers {
	hs := taskorch.NewHandlers()
	taskorch.AddHandler(hs, s.Charge, &taskorch.HandlerOpts{Timeout: 30 * time.Second})
	return hs
}
