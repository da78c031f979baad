package dashboard_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/dashboard"
)

var (
	graphNode = regexp.MustCompile(`<a href="/tasks/(\d+)" class="wf-node st st-([a-z]+)(?: wf-external)?" data-task-id="(\d+)" data-status="([a-z]+)" data-layer="(\d+)">`)
	graphEdge = regexp.MustCompile(`<path class="wf-edge wf-edge-[a-z]+" d="[^"]+" data-from="(\d+)" data-to="(\d+)"`)
)

// graphOf returns the nodes (id → status class, checked equal to data-status and the link) and
// the edges drawn in a workflow page's SVG, and each node's layer.
func graphOf(t *testing.T, body string) (map[int64]string, map[int64]int, [][2]int64) {
	t.Helper()
	start, end := strings.Index(body, `<svg class="wf-graph"`), strings.Index(body, `</svg>`)
	require.True(t, start >= 0 && end > start, "no graph in the page")
	svg := body[start:end]
	nodes, layers := map[int64]string{}, map[int64]int{}
	for _, m := range graphNode.FindAllStringSubmatch(svg, -1) {
		require.Equal(t, m[1], m[3], "a node links to its own task")
		require.Equal(t, m[2], m[4], "a node's class is its status")
		id, _ := strconv.ParseInt(m[1], 10, 64)
		_, dup := nodes[id]
		require.False(t, dup, "node %d drawn twice", id)
		nodes[id] = m[2]
		layers[id], _ = strconv.Atoi(m[5])
	}
	var edges [][2]int64
	for _, m := range graphEdge.FindAllStringSubmatch(svg, -1) {
		a, _ := strconv.ParseInt(m[1], 10, 64)
		b, _ := strconv.ParseInt(m[2], 10, 64)
		edges = append(edges, [2]int64{a, b})
	}
	require.Equal(t, strings.Count(svg, `class="wf-node `), len(nodes), "every node drawn has the expected markup")
	require.Equal(t, strings.Count(svg, `class="wf-edge `), len(edges), "every edge drawn has the expected markup")
	return nodes, layers, edges
}

// A workflow's page draws every node (a link to its task, its status as its class) and every
// edge of a fan-out and fan-in, in layers by depth, with the legend; the text of a task's error
// is escaped; the list shows the workflow with its counts, and its tasks' pages link to it.
func TestWorkflowGraphPage(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	w := seedWorkflow(t, pool)
	c := browserlessClient(t)
	wid := itoa(w.root)

	code, body, _ := get(t, c, srv.URL+"/workflows/"+wid, bearer()...)
	require.Equal(t, http.StatusOK, code, body)
	nodes, layers, edges := graphOf(t, body)
	require.Equal(t, w.statuses(), nodes)
	require.ElementsMatch(t, w.edges(), edges)
	require.Equal(t, map[int64]int{w.root: 0, w.reserve: 1, w.receipt: 1, w.audit: 1, w.ship: 2, w.archive: 2}, layers,
		"a node's layer is the longest path to it from the root")
	for _, s := range []string{"waiting", "pending", "running", "completed", "failed", "dead", "cancelled"} {
		require.Contains(t, body, `<span class="st st-`+s+`" data-legend="`+s+`">`, "legend")
	}
	require.Contains(t, body, `<text class="wf-type" x=`)
	require.Contains(t, body, ">wf.receipt</text>")
	require.Contains(t, body, ">demo.ship_order_supervisor</text>", "a db_function task is labelled with its function")
	require.Contains(t, body, ">#"+itoa(w.ship)+" · cancelled</text>")
	require.NotContains(t, body, "<script>alert", "a task's error is text, not markup")
	require.NotContains(t, body, "<img src=x")
	require.Contains(t, body, "&lt;script&gt;alert(&#34;xss&#34;)&lt;/script&gt;", "the error shows, escaped")
	require.Contains(t, body, `href="/workflows" class="active" aria-current="page">Workflows</a>`, "the nav marks the page")
	require.NotContains(t, body, `id="graph-capped"`, "a small workflow is drawn whole")
	// The dead node is offered for retry; the workflow, with tasks not ended, for cancelling.
	require.Contains(t, body, `data-retry-task="`+itoa(w.reserve)+`"`)
	require.Equal(t, 1, strings.Count(body, "data-retry-task="))

	// The list.
	code, body, _ = get(t, c, srv.URL+"/workflows", bearer()...)
	require.Equal(t, http.StatusOK, code, body)
	row := regexp.MustCompile(`(?s)<tr data-workflow-id="` + wid + `">(.*?)</tr>`).FindStringSubmatch(body)
	require.NotNil(t, row, "the workflow is listed")
	require.Contains(t, row[1], `href="/workflows/`+wid+`"`)
	require.Contains(t, row[1], `<td class="num">6</td>`)
	for _, s := range []string{"waiting", "pending", "running", "completed", "dead", "cancelled"} {
		require.Contains(t, row[1], `data-status="`+s+`" title="1 `+s+`">`+s+" 1</span>")
	}
	require.NotContains(t, row[1], `data-status="failed"`)
	require.Equal(t, 1, strings.Count(body, "data-workflow-id="), "only the seeded workflow")

	// Each task's page links its workflow, the root's too.
	for id := range w.statuses() {
		_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(id), bearer()...)
		require.Contains(t, body, `<a href="/workflows/`+wid+`" id="task-workflow">`, "task %d", id)
	}
	_, body, _ = get(t, c, srv.URL+"/tasks/"+itoa(w.ship), bearer()...)
	require.Contains(t, body, `waits for <a href="/tasks/`+itoa(w.reserve)+`">`)
}

// An id that is no workflow's is not found; one that is no id is a bad request; a task outside
// any workflow links none.
func TestWorkflowPageBadIDs(t *testing.T) {
	t.Parallel()
	srv, pool, s := newDashboard(t, dashboard.Config{})
	w := seedWorkflow(t, pool)
	c := browserlessClient(t)
	for _, p := range []string{"/workflows/999999", "/workflows/" + itoa(s.pending), "/workflows/" + itoa(w.receipt)} {
		code, body, _ := get(t, c, srv.URL+p, bearer()...)
		require.Equal(t, http.StatusNotFound, code, p)
		require.Contains(t, body, "no workflow", p)
	}
	for _, p := range []string{"/workflows/abc", "/workflows/0", "/workflows/-4", "/workflows/99999999999999999999", "/workflows?before=x"} {
		code, _, _ := get(t, c, srv.URL+p, bearer()...)
		require.Equal(t, http.StatusBadRequest, code, p)
	}
	_, body, _ := get(t, c, srv.URL+"/tasks/"+itoa(s.pending), bearer()...)
	require.NotContains(t, body, `id="task-workflow"`)
	// Without credentials, the pages ask for them.
	for _, p := range []string{"/workflows", "/workflows/" + itoa(w.root)} {
		code, _, _ := get(t, c, srv.URL+p)
		require.Equal(t, http.StatusUnauthorized, code, p)
	}
}

// A workflow of more than 1,000 tasks draws its first 1,000 by id and says so.
func TestWorkflowGraphCapped(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	var root int64
	require.NoError(t, pool.QueryRow(t.Context(), `select queues.enqueue('fan.root', '{}')`).Scan(&root))
	_, err := pool.Exec(t.Context(), `select queues.enqueue_many(array_fill('fan.leaf'::text, array[1100]),
		array(select jsonb_build_object('i', i) from generate_series(1, 1100) i), _after => array[$1::bigint])`, root)
	require.NoError(t, err)
	code, body, _ := get(t, browserlessClient(t), srv.URL+"/workflows/"+itoa(root), bearer()...)
	require.Equal(t, http.StatusOK, code)
	nodes, layers, edges := graphOf(t, body)
	require.Equal(t, 1000, len(nodes))
	require.Equal(t, 999, len(edges))
	require.Equal(t, "pending", nodes[root])
	for id, s := range nodes {
		if id != root {
			require.Equal(t, "waiting", s)
			require.Equal(t, 1, layers[id])
		}
	}
	require.Contains(t, body, `id="graph-capped"`)
	require.Contains(t, body, "This workflow has 1,101 tasks: the graph draws the first 1,000 by id")
}

// A task enqueued after tasks of two workflows joins the older one: its page draws the other
// workflow's parent too, marked, with its edge; a parent deleted since is named under the graph.
func TestWorkflowGraphOtherWorkflowParent(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	ctx := t.Context()
	q := func(sql string, args ...any) int64 {
		t.Helper()
		var id int64
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&id), sql)
		return id
	}
	a1 := q(`select queues.enqueue('a.first', '{}')`)
	a2 := q(`select queues.enqueue('a.second', '{}', _after => array[$1::bigint])`, a1)
	b1 := q(`select queues.enqueue('b.first', '{}')`)
	b2 := q(`select queues.enqueue('b.second', '{}', _after => array[$1::bigint])`, b1)
	join := q(`select queues.enqueue('a.join', '{}', _after => array[$1::bigint, $2::bigint])`, a2, b2)
	require.Equal(t, a1, q(`select workflow_id from queues.task where task_id = $1`, join), "the older workflow")

	c := browserlessClient(t)
	code, body, _ := get(t, c, srv.URL+"/workflows/"+itoa(a1), bearer()...)
	require.Equal(t, http.StatusOK, code)
	nodes, layers, edges := graphOf(t, body)
	require.Equal(t, map[int64]string{a1: "pending", a2: "waiting", b2: "waiting", join: "waiting"}, nodes)
	require.ElementsMatch(t, [][2]int64{{a1, a2}, {a2, join}, {b2, join}}, edges)
	require.Equal(t, 2, layers[join])
	require.Contains(t, body, `class="wf-node st st-waiting wf-external" data-task-id="`+itoa(b2)+`"`)
	require.Contains(t, body, ">#"+itoa(b2)+" · other workflow</text>")
	require.Contains(t, body, "b.second · task "+itoa(b2)+" · waiting · of workflow "+itoa(b1))
	require.Contains(t, body, "<p class=\"muted\">3 tasks", "the other workflow's task is not counted")

	// b2 is cancelled and deleted: the join names a parent that is gone.
	_, err := pool.Exec(ctx, `select queues.cancel_task($1, 'test')`, b2)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `delete from queues.task where task_id = $1`, b2)
	require.NoError(t, err)
	code, body, _ = get(t, c, srv.URL+"/workflows/"+itoa(a1), bearer()...)
	require.Equal(t, http.StatusOK, code)
	nodes, _, edges = graphOf(t, body)
	require.NotContains(t, nodes, b2)
	require.ElementsMatch(t, [][2]int64{{a1, a2}, {a2, join}}, edges)
	require.Contains(t, body, "Parents no longer in the database (pruned by retention): task "+itoa(b2)+".")
}

// A workflow whose first task was deleted (retention) is still found by its id: its other tasks
// are drawn, the first one is named as gone, and the list says its first task was pruned.
func TestWorkflowRootPruned(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newDashboard(t, dashboard.Config{})
	w := seedWorkflow(t, pool)
	_, err := pool.Exec(t.Context(), `delete from queues.task where task_id = $1`, w.root)
	require.NoError(t, err)
	c := browserlessClient(t)
	code, body, _ := get(t, c, srv.URL+"/workflows/"+itoa(w.root), bearer()...)
	require.Equal(t, http.StatusOK, code, body)
	nodes, layers, edges := graphOf(t, body)
	want := w.statuses()
	delete(want, w.root)
	require.Equal(t, want, nodes)
	require.ElementsMatch(t, [][2]int64{{w.reserve, w.ship}, {w.receipt, w.ship}, {w.receipt, w.archive}}, edges)
	require.Equal(t, 0, layers[w.reserve], "a task whose parents are gone is drawn first")
	require.Contains(t, body, "Parents no longer in the database (pruned by retention): task "+itoa(w.root)+".")
	require.Contains(t, body, `<p class="muted">5 tasks`)
	_, body, _ = get(t, c, srv.URL+"/workflows", bearer()...)
	require.Regexp(t, `<tr data-workflow-id="`+itoa(w.root)+`">\s*<td class="num"><a href="/workflows/`+itoa(w.root)+`">`+itoa(w.root)+`</a></td>\s*<td><span class="muted">pruned</span></td>\s*<td class="num">5</td>`, body)
}
