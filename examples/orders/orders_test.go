package orders_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/examples/orders"
	"github.com/taskorch/taskorch/taskorchtest"
)

// gateway answers what the test tells it to, per customer, and counts its calls.
type gateway struct {
	mu      sync.Mutex
	answers map[string]error
	calls   int
}

func (g *gateway) Charge(_ context.Context, customer string, cents int64) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	if err := g.answers[customer]; err != nil {
		return "", err
	}
	return "rcpt-" + customer, nil
}

// newService returns the service on a migrated database of the test's own.
func newService(t *testing.T, gw orders.Gateway) (*orders.Service, *pgxpool.Pool) {
	t.Helper()
	pool := taskorchtest.NewDB(t, serverURL(t), nil) // dropped when the test ends
	_, err := pool.Exec(t.Context(), orders.Schema)
	require.NoError(t, err)
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() }) // runs before the pool is closed: last registered, first run
	return &orders.Service{Pool: pool, Client: client, Gateway: gw}, pool
}

// CreateOrder enqueues the charge in the caller's transaction: in the test's transaction, which
// is rolled back, nothing is committed.
func TestCreateOrderEnqueuesInTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, pool := newService(t, &gateway{})
	t.Run("in the transaction", func(t *testing.T) {
		tx := taskorchtest.Tx(t, pool)
		orderID, _, err := s.CreateOrder(ctx, tx, "ada", 1200)
		require.NoError(t, err)
		task := taskorchtest.RequireEnqueued[orders.ChargeOrder](ctx, t, tx, &taskorchtest.RequireEnqueuedOpts{MaxAttempts: 5})
		require.Equal(t, orders.ChargeOrder{OrderID: orderID, Customer: "ada", AmountCents: 1200}, task.Args)
	})
	taskorchtest.RequireNotEnqueued[orders.ChargeOrder](ctx, t, pool) // rolled back

	tx := taskorchtest.Tx(t, pool)
	_, _, err := s.CreateOrder(ctx, tx, "", 0)
	require.ErrorContains(t, err, "an order needs a customer and a positive amount")
	taskorchtest.RequireNotEnqueued[orders.ChargeOrder](ctx, t, tx)
}

// The charge handler, run once each way through taskorchtest.WorkTask: a receipt is its result,
// a declined card discards it, a busy gateway snoozes it, another error retries it.
func TestCharge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, pool := newService(t, &gateway{answers: map[string]error{
		"declined": orders.ErrDeclined, "busy": orders.ErrBusy, "down": errors.New("connection refused")}})
	cfg := &taskorch.WorkerConfig{Handlers: s.Handlers()}
	order := func(customer string) (orderID, taskID int64) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		orderID, taskID, err = s.CreateOrder(ctx, tx, customer, 500)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx)) // the handler reads and writes orders on the pool
		return orderID, taskID
	}

	id, task := order("ada")
	res := taskorchtest.WorkTask(ctx, t, cfg, pool, task)
	require.Equal(t, taskorchtest.OutcomeCompleted, res.Outcome)
	require.Equal(t, taskorch.StatusCompleted, res.Task.Status)
	require.JSONEq(t, `{"receipt": "rcpt-ada"}`, string(res.Task.Result))
	o, err := s.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "paid", o.Status)
	require.Equal(t, "rcpt-ada", *o.Receipt)

	id, task = order("declined")
	res = taskorchtest.WorkTask(ctx, t, cfg, pool, task)
	require.Equal(t, taskorch.StatusFailed, res.Task.Status, "discarded: not retried")
	require.ErrorIs(t, res.Err, orders.ErrDeclined)
	o, err = s.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "declined", o.Status)

	_, task = order("busy")
	res = taskorchtest.WorkTask(ctx, t, cfg, pool, task)
	require.Equal(t, taskorchtest.OutcomeSnoozed, res.Outcome)
	require.Equal(t, orders.BusyRetry, res.Snooze)
	require.Equal(t, taskorch.StatusPending, res.Task.Status)

	_, task = order("down")
	res = taskorchtest.WorkTask(ctx, t, cfg, pool, task)
	require.Equal(t, taskorchtest.OutcomeFailed, res.Outcome)
	require.True(t, res.Retriable)
	require.Equal(t, taskorch.StatusPending, res.Task.Status, "retried later")
	require.Contains(t, *res.Task.LastError, "connection refused")
}

// The handler function on its own, in a unit test: HandlerContext lets its SetResult work
// outside a worker.
func TestChargeHandlerAlone(t *testing.T) {
	t.Parallel()
	s, pool := newService(t, &gateway{})
	var id int64
	require.NoError(t, pool.QueryRow(t.Context(), `insert into orders (customer, amount_cents) values ('bob', 900) returning id`).Scan(&id))

	ctx, result := taskorchtest.HandlerContext(t.Context(), 0)
	err := s.Charge(ctx, &taskorch.TaskFor[orders.ChargeOrder]{
		Task: &taskorch.Task{Type: "orders.charge", Attempt: 1}, Args: orders.ChargeOrder{OrderID: id, Customer: "bob", AmountCents: 900}})
	require.NoError(t, err)
	var c orders.Charged
	require.NoError(t, result.Decode(&c))
	require.Equal(t, "rcpt-bob", c.Receipt)
}
