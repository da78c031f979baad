package browser_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// drawnNode is a node of the graph as Chromium drew it.
type drawnNode struct {
	ID     int64   `json:"id"`
	Status string  `json:"status"`
	Fill   string  `json:"fill"`
	Stroke string  `json:"stroke"`
	Legend string  `json:"legend"` // the background of the legend's badge of its status
	X      float64 `json:"x"`
	Y      float64 `json:"y"`
	W      float64 `json:"w"`
	H      float64 `json:"h"`
}

// drawnEdge is an edge as drawn: its two ends.
type drawnEdge struct {
	From   int64   `json:"from"`
	To     int64   `json:"to"`
	X1     float64 `json:"x1"`
	Y1     float64 `json:"y1"`
	X2     float64 `json:"x2"`
	Y2     float64 `json:"y2"`
	Length float64 `json:"length"`
}

const readGraphJS = `(() => {
	const legend = {};
	document.querySelectorAll('[data-legend]').forEach(e => { legend[e.dataset.legend] = getComputedStyle(e).backgroundColor; });
	const nodes = Array.from(document.querySelectorAll('#wf-graph a.wf-node')).map(a => {
		const r = a.querySelector('rect'), s = getComputedStyle(r), b = r.getBBox();
		return {id: Number(a.dataset.taskId), status: a.dataset.status, fill: s.fill, stroke: s.stroke,
			legend: legend[a.dataset.status] || '', x: b.x, y: b.y, w: b.width, h: b.height};
	});
	const edges = Array.from(document.querySelectorAll('#wf-graph path.wf-edge')).map(p => {
		const n = p.getTotalLength(), a = p.getPointAtLength(0), z = p.getPointAtLength(n);
		return {from: Number(p.dataset.from), to: Number(p.dataset.to), x1: a.x, y1: a.y, x2: z.x, y2: z.y, length: n};
	});
	return {nodes, edges};
})()`

type drawnGraph struct {
	Nodes []drawnNode `json:"nodes"`
	Edges []drawnEdge `json:"edges"`
}

// TestBrowserWorkflowGraph opens a seeded workflow's page in Chromium: the SVG draws every node
// in its status's colour (the legend's, one colour per status), every edge from its parent's
// box to its child's, a node opens its task, and the error made to inject script stays text.
// Then Cancel workflow, confirmed, cancels every node not ended: the page shows them cancelled.
func TestBrowserWorkflowGraph(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	seed(t, pool)
	w := seedWorkflow(t, pool)
	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	page := base + "/workflows/" + itoa(w.root)
	b.do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#wf-graph`)))
	b.screenshot("workflow_graph")

	g := eval[drawnGraph](b, readGraphJS)
	statuses := map[int64]string{}
	byID := map[int64]drawnNode{}
	colour := map[string]string{}
	for _, n := range g.Nodes {
		statuses[n.ID] = n.Status
		byID[n.ID] = n
		require.NotEmpty(t, n.Legend, "the legend has %s", n.Status)
		require.Equal(t, n.Legend, n.Fill, "node %d is filled in the colour of its status's badge", n.ID)
		if c, ok := colour[n.Status]; ok {
			require.Equal(t, c, n.Fill)
		}
		colour[n.Status] = n.Fill
		require.Positive(t, n.W)
		require.Positive(t, n.H)
	}
	require.Equal(t, w.statuses(), statuses, "every node, with its status")
	seen := map[string]string{}
	for s, c := range colour {
		require.NotContains(t, seen, c, "%s and %s share a colour", s, seen[c])
		seen[c] = s
	}
	var edges [][2]int64
	for _, e := range g.Edges {
		edges = append(edges, [2]int64{e.From, e.To})
		p, c := byID[e.From], byID[e.To]
		require.Positive(t, e.Length)
		require.InDelta(t, p.X+p.W, e.X1, 1, "edge %d→%d starts at its parent's right side", e.From, e.To)
		require.InDelta(t, p.Y+p.H/2, e.Y1, 1)
		require.InDelta(t, c.X, e.X2, 3, "edge %d→%d ends at its child's left side", e.From, e.To)
		require.InDelta(t, c.Y+c.H/2, e.Y2, 1)
		require.Less(t, p.X+p.W, c.X, "a parent is drawn left of its child")
	}
	require.ElementsMatch(t, w.edges(), edges)
	require.Zero(t, b.dialogCount(), "the error's script did not run")
	require.Zero(t, eval[int](b, `document.querySelectorAll('#wf-graph img, #wf-graph script, .wf-failed img, .wf-failed script').length`))
	require.Contains(t, b.text(`.wf-failed`), `<script>alert("xss")</script>`, "the error shows as text")

	// A node opens its task.
	b.do(chromedp.Evaluate[chromedp.Void](`(() => {
		document.body.dataset.stale = '1';
		document.querySelector('#wf-graph a.wf-node[data-task-id="`+itoa(w.ship)+`"]').dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}));
	})()`), chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #task-workflow`)))
	require.Contains(t, b.text(`h1`), "Task "+itoa(w.ship))
	require.Contains(t, b.text(`#task-workflow`), "workflow "+itoa(w.root))

	// Cancel workflow, with a reason, after its confirmation.
	b.do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#cancel-workflow`)))
	b.do(chromedp.SendKeys(chromedp.CSS(`#cancel-reason`), "order withdrawn"), click(`#cancel-workflow`),
		chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #flash`)))
	require.Contains(t, b.text(`#flash`), "Cancelled workflow "+itoa(w.root)+": 4 tasks.")
	require.Equal(t, 1, b.dialogCount(), "the cancel asked for confirmation")
	g = eval[drawnGraph](b, readGraphJS)
	require.Len(t, g.Nodes, len(w.statuses()))
	for _, n := range g.Nodes {
		want := "cancelled"
		if n.ID == w.root {
			want = "completed"
		}
		require.Equal(t, want, n.Status, "node %d", n.ID)
		require.Equal(t, colour[want], n.Fill, "node %d in the colour of %s", n.ID, want)
	}
	require.Zero(t, eval[int](b, `document.querySelectorAll('#cancel-workflow').length`), "nothing left to cancel")
	var actor, reason string
	require.NoError(t, pool.QueryRow(t.Context(), `select actor, detail from queues.task_event where task_id = $1 and event = 'cancelled'`,
		w.audit).Scan(&actor, &reason))
	require.Equal(t, "dashboard:token", actor, "recorded as the signed-in token's")
	require.Equal(t, "order withdrawn", reason)
	b.screenshot("workflow_graph_cancelled")
}
