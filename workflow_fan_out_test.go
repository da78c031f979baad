package taskorch_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// queues.enqueue_many's _after applies to every task the call inserts: a fan-out of tasks after
// the same parents, all released by the last parent's completion. A duplicate (a known
// idempotency key) keeps its own parents, none here.
func TestWorkflowFanOutEnqueueMany(t *testing.T) {
	t.Parallel()
	_, pool := newClient(t)
	p1 := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	p2 := scalar[int64](t, pool, `select queues.enqueue('wf.p', '{}')`)
	existing := scalar[int64](t, pool, `select queues.enqueue('wf.kid', '{}', _idempotency_key => 'k')`)
	kids := scalar[[]int64](t, pool, `select queues.enqueue_many(array['wf.kid', 'wf.kid', 'wf.kid'], array['{}', '{}', '{}']::jsonb[],
		_after => array[$1::bigint, $2])`, p1, p2)
	require.Len(t, kids, 3)
	keyed := scalar[[]int64](t, pool, `select array_agg(task_id order by ord) from queues.enqueue_many_with_result(array['wf.kid', 'wf.kid'], array['{}', '{}']::jsonb[],
		_idempotency_keys => array['k', 'new'], _after => array[$1::bigint], _on_parent_failure => 'run') with ordinality as r(task_id, duplicate, ord)`, p1)
	require.Equal(t, existing, keyed[0])
	require.Equal(t, "pending", statusOf(t, pool, existing))
	for _, k := range append(kids, keyed[1]) {
		require.Equal(t, "waiting", statusOf(t, pool, k))
	}
	_, err := pool.Exec(t.Context(), `select queues.enqueue_many(array['wf.kid'], array['{}']::jsonb[], _after => array[$1::bigint], _on_parent_failure => 'banana')`, p1)
	require.ErrorContains(t, err, "enqueue_many: _on_parent_failure must be 'cancel' or 'run', not 'banana'")

	completeUnder(t, pool, []int64{p1}, []int64{claimOne(t, pool, "wf.p", p1)})
	require.Equal(t, "pending", statusOf(t, pool, keyed[1]))
	for _, k := range kids {
		require.Equal(t, "waiting", statusOf(t, pool, k))
	}
	completeUnder(t, pool, []int64{p2}, []int64{claimOne(t, pool, "wf.p", p2)})
	for _, k := range kids {
		require.Equal(t, "pending", statusOf(t, pool, k))
	}
}
