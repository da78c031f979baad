package taskorch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

func TestListFiltersAndKeysetPaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, pool := newClient(t)
	var params []taskorch.EnqueueParams
	for i := range 25 {
		typ := "alpha"
		if i%5 == 0 {
			typ = "beta"
		}
		params = append(params, taskorch.EnqueueParams{Args: raw(typ, `{}`)})
	}
	ids, err := c.EnqueueMany(ctx, params)
	require.NoError(t, err)
	got := claim(t, pool, "w", 3, "5 minutes")
	require.Len(t, got, 3)

	// Page through everything, 10 at a time, newest first.
	var all []int64
	p := &taskorch.ListParams{Limit: 10}
	for {
		page, err := c.List(ctx, p)
		require.NoError(t, err)
		for _, task := range page.Tasks {
			all = append(all, task.ID)
		}
		if page.Next == 0 {
			break
		}
		p.Before = page.Next
	}
	require.Len(t, all, 25)
	for i := 1; i < len(all); i++ {
		require.Greater(t, all[i-1], all[i], "newest first, no repeats")
	}
	require.Equal(t, ids[len(ids)-1].TaskID, all[0])

	beta, err := c.List(ctx, &taskorch.ListParams{Types: []string{"beta"}})
	require.NoError(t, err)
	require.Len(t, beta.Tasks, 5)
	require.Zero(t, beta.Next)

	running, err := c.List(ctx, &taskorch.ListParams{Statuses: []taskorch.Status{taskorch.StatusRunning}})
	require.NoError(t, err)
	require.Len(t, running.Tasks, 3)

	both, err := c.List(ctx, &taskorch.ListParams{Types: []string{"beta"}, Statuses: []taskorch.Status{taskorch.StatusPending, taskorch.StatusRunning}})
	require.NoError(t, err)
	require.Len(t, both.Tasks, 5)

	_, err = c.List(ctx, &taskorch.ListParams{Statuses: []taskorch.Status{"finished"}})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	_, err = c.List(ctx, &taskorch.ListParams{Limit: -1})
	require.ErrorIs(t, err, taskorch.ErrInvalidInput)
	_, err = c.History(ctx, 123456)
	require.ErrorIs(t, err, taskorch.ErrNotFound)
}
