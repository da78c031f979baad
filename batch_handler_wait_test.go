package taskorch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/tasktype"
)

// With MaxWait, a started batch stays open to tasks of its type claimed meanwhile, and is called
// as soon as it holds MaxSize tasks, without waiting MaxWait out: a task claimed alone waits in
// its batch for two enqueued after its claim, and the three are one call.
func TestBatchHandlerMaxWaitGathersLaterTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	first := enqueueItems(t, c, 1, nil, nil)[0]
	var calls batchCalls
	startBatchWorker(t, pool, func(_ context.Context, tasks []*taskorch.TaskFor[batchItem]) []error {
		calls.add(tasks)
		return make([]error, len(tasks))
	}, &taskorch.BatchOpts{MaxSize: 3, MaxWait: time.Hour}, nil)

	waitStatus(t, pool, first, taskorch.StatusRunning) // claimed, waiting in its open batch
	require.Empty(t, calls.get(), "the batch is not called before it is full or MaxWait has passed")
	more, err := c.EnqueueMany(ctx, []taskorch.EnqueueParams{{Args: batchItem{N: 1}}, {Args: batchItem{N: 2}}})
	require.NoError(t, err)
	for _, id := range []int64{first, more[0].TaskID, more[1].TaskID} {
		waitStatus(t, pool, id, taskorch.StatusCompleted)
	}
	require.Equal(t, [][]int64{{first, more[0].TaskID, more[1].TaskID}}, calls.get())
}

// A worker that stops does not wait out an open batch's MaxWait: the batch is called with the
// tasks it holds, and they complete.
func TestBatchHandlerStopClosesOpenBatch(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	id := enqueueItems(t, c, 1, nil, nil)[0]
	hs := taskorch.NewHandlers()
	taskorch.AddBatchHandler(hs, func(_ context.Context, tasks []*taskorch.TaskFor[batchItem]) []error {
		return make([]error, len(tasks))
	}, &taskorch.BatchOpts{MaxWait: time.Hour})
	started := &startedObserver{started: make(chan struct{})}
	_, stop := startWorker(t, pool, &taskorch.WorkerConfig{Handlers: hs, ShutdownGrace: time.Hour, Observers: []taskorch.Observer{started}})
	// Started: in its open batch. (Its status says running from its claim on, also while it
	// waits in the claim-ahead buffer, which a stopping worker gives back instead.)
	<-started.started
	stop()
	waitStatus(t, pool, id, taskorch.StatusCompleted)
}

// startedObserver closes started when the worker starts its first task.
type startedObserver struct {
	tasktype.ObserverDefaults
	once    sync.Once
	started chan struct{}
}

func (o *startedObserver) TaskStarted(ctx context.Context, _ *taskorch.Task) context.Context {
	o.once.Do(func() { close(o.started) })
	return ctx
}
