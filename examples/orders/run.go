package orders

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
)

// RunConfig is what Run needs.
type RunConfig struct {
	// Pool is the service's pool; it stays the caller's (Run closes what it opened, not this).
	Pool    *pgxpool.Pool
	Gateway Gateway
	// Addr is the HTTP address to listen on ("127.0.0.1:8080"; port 0 for any).
	Addr string
	// Listening, when set, is called with the address once the server listens.
	Listening func(addr string)
	// ShutdownTimeout bounds how long requests in flight may take to finish at shutdown
	// (default 10s); the worker's running tasks have WorkerConfig.ShutdownGrace.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
}

// Run serves the HTTP API and runs a worker until ctx is done, then shuts down gracefully: the
// server stops taking requests and lets those in flight finish (a Wait among them), then the
// worker stops claiming and lets its running tasks finish (or gives them back), then the client
// closes its Wait connection. The pool is left open for the caller to close.
func Run(ctx context.Context, cfg RunConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	client, err := taskorch.NewClient(cfg.Pool, nil)
	if err != nil {
		return err
	}
	defer func() { _ = client.Close() }()
	s := &Service{Pool: cfg.Pool, Client: client, Gateway: cfg.Gateway}
	w, err := taskorch.NewWorker(cfg.Pool, &taskorch.WorkerConfig{Handlers: s.Handlers(), Logger: log})
	if err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.HTTPHandler(), ReadHeaderTimeout: 5 * time.Second}

	// The worker runs until told to stop, after the server: a request in flight may wait for
	// a task the worker runs.
	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorker()
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(workerCtx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	if cfg.Listening != nil {
		cfg.Listening(ln.Addr().String())
	}
	log.Info("orders: serving", "addr", ln.Addr().String(), "worker", w.ID())

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveDone:
		runErr = err // the server failed: stop the rest
		serveDone <- nil
	case err := <-workerDone:
		runErr = err
		workerDone <- nil
	}
	timeout := cfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if err := <-serveDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
		runErr = errors.Join(runErr, err)
	}
	stopWorker()
	if err := <-workerDone; err != nil {
		runErr = errors.Join(runErr, err)
	}
	log.Info("orders: stopped")
	return runErr
}
