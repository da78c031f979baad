package taskorch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// cutProxy is a TCP proxy in front of PostgreSQL that a test can cut: every connection through
// it is closed at once (the server sees its clients gone, as after a reset) and new ones are
// refused, until it heals.
type cutProxy struct {
	ln     net.Listener
	target string
	cut    atomic.Bool

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.closeAll()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.cut.Load() {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); _ = s.Close(); _ = c.Close() }()
		go func() { _, _ = io.Copy(c, s); _ = c.Close(); _ = s.Close() }()
	}
}

func (p *cutProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// cutOff closes every connection and refuses new ones; heal lets them in again.
func (p *cutProxy) cutOff() { p.cut.Store(true); p.closeAll() }
func (p *cutProxy) heal()   { p.cut.Store(false) }

// A worker cut off from the database (every connection reset, none to be had) is alive: its
// handler runs on. Its session gone, the leader recovers its task after the grace (fenced: a
// new lease is needed to run it). When the network heals, the cut-off worker registers again,
// finds at once that the task is no longer its own, stops the handler and counts the lost
// lease; its outcome under the old lease is never applied.
func TestWorkerCutOffLosesItsTasksCleanly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDBURL(t)
	direct, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(direct.Close)
	proxy := startCutProxy(t, direct.Config().ConnConfig.Host+":"+fmt.Sprint(direct.Config().ConnConfig.Port))
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(proxy.addr())
	require.NoError(t, err)
	cfg.ConnConfig.Host = host
	_, err = fmt.Sscan(port, &cfg.ConnConfig.Port)
	require.NoError(t, err)
	cfg.MaxConns = 8
	cutPool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(cutPool.Close)

	// The leader runs no task of this test (OnlyKnownTypes: it knows none).
	leader, _ := startWorker(t, direct, &taskorch.WorkerConfig{
		ID: "w-leader", Handlers: taskorch.NewHandlers(), SessionGrace: 200 * time.Millisecond, OnlyKnownTypes: true,
	})
	require.Eventually(t, leader.IsLeader, 20*time.Second, 5*time.Millisecond)

	started := make(chan int64, 1)
	stopped := make(chan error, 1)
	hs := taskorch.NewHandlers()
	hs.HandleFunc("long", func(ctx context.Context, task *taskorch.Task) error {
		started <- task.ID
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return nil
	})
	obs := newCountingObserver()
	startWorker(t, cutPool, &taskorch.WorkerConfig{ID: "w-cut", Handlers: hs, Observers: []taskorch.Observer{obs}, Concurrency: 1})
	require.Eventually(t, func() bool {
		return scalar[bool](t, direct, `select exists (select from queues.worker where worker_id = 'w-cut' and session_key is not null)`)
	}, 20*time.Second, 5*time.Millisecond)

	id := scalar[int64](t, direct, `select queues.enqueue('long', '{}')`)
	require.Equal(t, id, <-started)
	lease := scalar[int64](t, direct, `select lease_id from queues.task where task_id = $1 and worker_id = 'w-cut'`, id)

	proxy.cutOff()
	require.Eventually(t, func() bool {
		return scalar[bool](t, direct, `select exists (select from queues.error
			where task_id = $1 and context->>'cause' = 'session_lost' and (context->>'lease_id')::bigint = $2)`, id, lease)
	}, 20*time.Second, 5*time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("the handler was stopped while its worker was cut off: %v", err)
	default:
	}

	proxy.heal()
	select {
	case err := <-stopped:
		require.True(t, errors.Is(err, taskorch.ErrLeaseLost), "stopped because its lease is lost: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the handler of a recovered task was not stopped after the worker came back")
	}
	require.Eventually(t, func() bool { return obs.leasesLost.Load() == 1 }, 20*time.Second, 5*time.Millisecond)
	require.Zero(t, scalar[int](t, direct, `select count(*) from queues.task where task_id = $1 and lease_id = $2 and status = 'completed'`, id, lease),
		"its outcome is never applied")
}
