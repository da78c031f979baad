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
	graphNode = regexp.MustCompile(`<a href="/tasks/(\d+)" class="wf-node st st-([a-z]+)" data-task-id="(\d+)" data-status="([a-z]+)" data-layer="(\d+)">`)
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
