package taskorch_test

import (
	"context"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// Every read has a Tx twin that sees its transaction's uncommitted writes, which the pool's
// reads do not; after a rollback none of them is left.
func TestGetListHistoryPauseTxTwins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	res, err := c.EnqueueTx(ctx, tx, raw("twin", `{"n": 1}`), nil)
	require.NoError(t, err)

	task, err := c.GetTx(ctx, tx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, taskorch.StatusPending, task.Status)
	_, err = c.Get(ctx, res.TaskID)
	require.ErrorIs(t, err, taskorch.ErrNotFound, "not committed")

	page, err := c.ListTx(ctx, tx, &taskorch.ListParams{Types: []string{"twin"}})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	require.Equal(t, res.TaskID, page.Tasks[0].ID)
	page, err = c.List(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, page.Tasks)

	_, err = c.CancelTx(ctx, tx, res.TaskID)
	require.NoError(t, err)
	h, err := c.HistoryTx(ctx, tx, res.TaskID)
	require.NoError(t, err)
	require.NotEmpty(t, h.Events)
	require.Equal(t, "cancelled", h.Events[len(h.Events)-1].Event)
	_, err = c.History(ctx, res.TaskID)
	require.ErrorIs(t, err, taskorch.ErrNotFound)

	changed, err := c.PauseQueueTx(ctx, tx, "twin", "the test")
	require.NoError(t, err)
	require.True(t, changed)
	paused, err := c.PausedQueuesTx(ctx, tx)
	require.NoError(t, err)
	require.Len(t, paused, 1)
	require.Equal(t, "twin", paused[0].TaskType)
	require.Equal(t, "the test", paused[0].PausedBy)
	paused, err = c.PausedQueues(ctx)
	require.NoError(t, err)
	require.Empty(t, paused)

	require.NoError(t, tx.Rollback(ctx))
	_, err = c.Get(ctx, res.TaskID)
	require.ErrorIs(t, err, taskorch.ErrNotFound)
	_, err = c.History(ctx, res.TaskID)
	require.ErrorIs(t, err, taskorch.ErrNotFound)
	page, err = c.List(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, page.Tasks)
	paused, err = c.PausedQueues(ctx)
	require.NoError(t, err)
	require.Empty(t, paused)

	// A new transaction sees nothing of the rolled-back one either.
	tx2, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx2.Rollback(ctx) }()
	_, err = c.GetTx(ctx, tx2, res.TaskID)
	require.ErrorIs(t, err, taskorch.ErrNotFound)
	_, err = c.HistoryTx(ctx, tx2, res.TaskID)
	require.ErrorIs(t, err, taskorch.ErrNotFound)
	page, err = c.ListTx(ctx, tx2, nil)
	require.NoError(t, err)
	require.Empty(t, page.Tasks)
	paused, err = c.PausedQueuesTx(ctx, tx2)
	require.NoError(t, err)
	require.Empty(t, paused)
}

// ResumeQueueTx resumes a queue only if its transaction commits.
func TestPauseResumeQueueTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	_, err := c.PauseQueue(ctx, "twin", "")
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	changed, err := c.ResumeQueueTx(ctx, tx, "twin")
	require.NoError(t, err)
	require.True(t, changed)
	paused, err := c.PausedQueuesTx(ctx, tx)
	require.NoError(t, err)
	require.Empty(t, paused, "resumed in the transaction")
	paused, err = c.PausedQueues(ctx)
	require.NoError(t, err)
	require.Len(t, paused, 1, "still paused outside it")
	require.NoError(t, tx.Rollback(ctx))
	paused, err = c.PausedQueues(ctx)
	require.NoError(t, err)
	require.Len(t, paused, 1, "rolled back: still paused")

	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	changed, err = c.ResumeQueueTx(ctx, tx, "twin")
	require.NoError(t, err)
	require.True(t, changed)
	require.NoError(t, tx.Commit(ctx))
	paused, err = c.PausedQueues(ctx)
	require.NoError(t, err)
	require.Empty(t, paused)
}

// doc.go names every Tx twin of the Client, and every method it names as one exists.
func TestDocListsEveryTxTwin(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	typ := reflect.TypeOf(&taskorch.Client{})
	named := regexp.MustCompile(`\b[A-Z][A-Za-z]*Tx\b`).FindAllString(string(doc), -1)
	for _, n := range named {
		_, ok := typ.MethodByName(n)
		require.True(t, ok, "doc.go names %s, which Client does not have", n)
	}
	for i := range typ.NumMethod() {
		m := typ.Method(i).Name
		if strings.HasSuffix(m, "Tx") {
			require.Contains(t, named, m, "doc.go's list of Tx twins lacks %s", m)
		}
	}
}
