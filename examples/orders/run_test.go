package orders_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/examples/orders"
	"github.com/taskorch/taskorch/taskorchtest"
)

// The service end to end: Run serves the API and runs a worker; an order posted with ?wait comes
// back charged, with its receipt; cancelling Run's context shuts everything down (TestMain's
// goleak finds no goroutine left once the tests end).
func TestRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := taskorchtest.NewDB(t, serverURL(t), nil)
	require.NoError(t, orders.Migrate(ctx, pool))

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- orders.Run(runCtx, orders.RunConfig{
			Pool: pool, Gateway: &gateway{}, Addr: "127.0.0.1:0",
			Listening: func(a string) { addr <- a },
			Logger:    slog.New(slog.DiscardHandler),
		})
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("Run returned before it listened: %v", err)
	}

	body := bytes.NewBufferString(`{"customer": "ada", "amount_cents": 1200}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/orders?wait=30s", body)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var created orders.OrderCreated
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NotNil(t, created.Charge, "the charge finished within the wait")
	require.Equal(t, taskorch.StatusCompleted, *created.Charge)
	require.Equal(t, "rcpt-ada", created.Receipt)

	req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/orders/"+itoa(created.OrderID), nil)
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	var o orders.Order
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "paid", o.Status)

	req, err = http.NewRequestWithContext(ctx, http.MethodPost, base+"/orders", bytes.NewBufferString(`{"customer": ""}`))
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	http.DefaultClient.CloseIdleConnections()

	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context was cancelled")
	}
	taskorchtest.RequireEnqueued[orders.ChargeOrder](ctx, t, pool, &taskorchtest.RequireEnqueuedOpts{Status: taskorch.StatusCompleted})
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
