package taskorch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/tasktype"
)

// queues.quiet_worker and queues.resume_worker: the heartbeat of the quieted process says
// 'quiet', each change is recorded with who made it, a process restarted under the same id is
// not quiet, the quiet goes with the worker's row, and bad input is refused.
func TestQuietWorkerSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewDB(t)
	register := func(id, instance string) {
		mustExec(t, pool, `select * from queues.register_worker_instance($1, $2, 'h', 1, 4, 'v', 'postgres', null, false, interval '30 seconds')`, id, instance)
	}
	state := func(id, instance string) string {
		return scalar[string](t, pool, `select queues.heartbeat_worker_state($1, $2)`, id, instance)
	}
	register("w1", "p1")
	require.Equal(t, "active", state("w1", "p1"))
	require.Equal(t, "gone", state("w1", "other-process"))

	require.True(t, scalar[bool](t, pool, `select queues.quiet_worker('w1', 'alice')`))
	require.False(t, scalar[bool](t, pool, `select queues.quiet_worker('w1', 'bob')`), "quiet already")
	require.Equal(t, "quiet", state("w1", "p1"))
	ws, err := admin.ListWorkers(ctx, pool)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.NotNil(t, ws[0].QuietSince)
	require.Equal(t, "alice", ws[0].QuietBy)

	require.True(t, scalar[bool](t, pool, `select queues.resume_worker('w1', 'carol')`))
	require.False(t, scalar[bool](t, pool, `select queues.resume_worker('w1')`), "not quiet")
	require.Equal(t, "active", state("w1", "p1"))
	require.Equal(t, []string{"quieted alice", "resumed carol"},
		scalar[[]string](t, pool, `select array_agg(event || ' ' || actor order by worker_event_id) from queues.worker_event where worker_id = 'w1'`))

	// Another process took the id over: the quiet was the old one's.
	require.True(t, scalar[bool](t, pool, `select queues.quiet_worker('w1')`))
	mustExec(t, pool, `update queues.worker set instance = 'p2' where worker_id = 'w1'`)
	require.Equal(t, "active", state("w1", "p2"))
	ws, err = admin.ListWorkers(ctx, pool)
	require.NoError(t, err)
	require.Nil(t, ws[0].QuietSince)
	require.False(t, scalar[bool](t, pool, `select queues.resume_worker('w1')`), "the new process was not quiet")
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.worker_quiet`))

	// The quiet goes with the worker's row.
	require.True(t, scalar[bool](t, pool, `select queues.quiet_worker('w1')`))
	require.True(t, scalar[bool](t, pool, `select queues.deregister_worker('w1', 'p2')`))
	require.Zero(t, scalar[int64](t, pool, `select count(*) from queues.worker_quiet`))

	// Bad input: no such worker (P0002, ErrWorkerNotFound), an actor with a control character.
	for _, c := range []struct{ sql, code string }{
		{`select queues.quiet_worker('w1')`, "P0002"},
		{`select queues.resume_worker('nobody')`, "P0002"},
		{`select queues.quiet_worker(null)`, "P0002"},
	} {
		_, err := pool.Exec(ctx, c.sql)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, c.sql)
		require.Equal(t, c.code, pgErr.Code, c.sql)
	}
	_, err = admin.QuietWorker(ctx, pool, "nobody", "")
	require.ErrorIs(t, err, admin.ErrWorkerNotFound)
	register("w3", "p3")
	_, err = admin.QuietWorker(ctx, pool, "w3", "eve\x07")
	require.ErrorIs(t, err, admin.ErrInvalidInput)
	require.Equal(t, "active", state("w3", "p3"))
}

// A quieted worker finishes the task it runs, gives back what it claimed ahead and claims
// nothing more, while another worker runs the rest; resumed, it claims again. The heartbeat
// carries the word, and the worker reports it to its observers (taskorch_worker_quiet).
func TestQuietWorkerFinishesAndClaimsNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := dbtest.NewDB(t)
	client, err := taskorch.NewClient(pool, nil)
	require.NoError(t, err)

	var mu sync.Mutex
	ranOn := map[int64]string{}
	started := make(chan int64, 10)
	release := make(chan struct{})
	handlers := func(worker string) *taskorch.Handlers {
		hs := taskorch.NewHandlers()
		hs.HandleFunc("q", func(ctx context.Context, task *taskorch.Task) error {
			mu.Lock()
			ranOn[task.ID] = worker
			mu.Unlock()
			started <- task.ID
			if strings.Contains(string(task.Payload), "hold") {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		return hs
	}
	enqueue := func(payload string) int64 {
		res, err := client.Enqueue(ctx, raw("q", payload), nil)
		require.NoError(t, err)
		return res.TaskID
	}
	quietEvents := &quietObserver{ch: make(chan bool, 4)}
	const heartbeat = 100 * time.Millisecond
	startWorker(t, pool, &taskorch.WorkerConfig{ID: "quiet-a", Handlers: handlers("quiet-a"), Concurrency: 1,
		HeartbeatInterval: heartbeat, Observers: []taskorch.Observer{quietEvents}})

	held := enqueue(`{"hold":true}`)
	require.Equal(t, held, <-started)
	rest := []int64{enqueue(`{}`), enqueue(`{}`)}

	changed, err := admin.QuietWorker(ctx, pool, "quiet-a", "tester")
	require.NoError(t, err)
	require.True(t, changed)
	select {
	case on := <-quietEvents.ch:
		require.True(t, on)
	case <-ctx.Done():
		t.Fatal("the worker never learned it was quiet")
	}
	// What it claimed ahead is given back; the running task finishes.
	for _, id := range rest {
		waitStatus(t, pool, id, taskorch.StatusPending)
	}
	rest = append(rest, enqueue(`{}`))
	close(release)
	waitStatus(t, pool, held, taskorch.StatusCompleted)

	// A free slot and three pending tasks: the quiet worker takes none. Proof that it had the
	// time to: five more heartbeats, over twice its longest poll interval (200 ms) — a worker that
	// claimed would have claimed them all by then.
	beats := func() time.Time {
		return scalar[time.Time](t, pool, `select last_heartbeat from queues.worker where worker_id = 'quiet-a'`)
	}
	for range 5 {
		before := beats()
		require.Eventually(t, func() bool { return beats().After(before) }, 20*time.Second, 10*time.Millisecond)
	}
	require.Equal(t, int64(len(rest)), scalar[int64](t, pool, `select count(*) from queues.task where task_id = any($1) and status = 'pending'`, rest))
	// Another worker takes them all.
	_, stopB := startWorker(t, pool, &taskorch.WorkerConfig{ID: "quiet-b", Handlers: handlers("quiet-b"), Concurrency: 4})
	for _, id := range rest {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	mu.Lock()
	for _, id := range rest {
		require.Equal(t, "quiet-b", ranOn[id], "task %d", id)
	}
	mu.Unlock()
	stopB()

	// Resumed, it claims again.
	changed, err = admin.ResumeWorker(ctx, pool, "quiet-a", "tester")
	require.NoError(t, err)
	require.True(t, changed)
	select {
	case on := <-quietEvents.ch:
		require.False(t, on)
	case <-ctx.Done():
		t.Fatal("the worker never learned it was resumed")
	}
	last := enqueue(`{}`)
	waitStatus(t, pool, last, taskorch.StatusCompleted)
	mu.Lock()
	require.Equal(t, "quiet-a", ranOn[last])
	mu.Unlock()
}

// quietObserver passes on the worker's EventQuiet.
type quietObserver struct {
	tasktype.ObserverDefaults
	ch chan bool
}

func (o *quietObserver) WorkerEvent(e tasktype.WorkerEvent) {
	if e.Kind == tasktype.EventQuiet {
		o.ch <- e.On
	}
}
