package dashboard

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/taskorch/taskorch"
)

// workflowGraph is a workflow drawn as an SVG (template "wfgraph"): one column per layer, a
// node's layer its depth (the longest path to it from a task without parents drawn), left to
// right; an edge from each parent to its child. The template writes every text as text, so a
// task's type or error cannot inject markup.
type workflowGraph struct {
	Width, Height int
	NodeW, NodeH  int
	Nodes         []graphNode
	Edges         []graphEdge
	Layers        int
}

// graphNode is a task drawn: a box at X, Y linking to its task's page.
type graphNode struct {
	ID       int64
	Href     string
	Status   taskorch.Status
	Class    string // the status badge's classes (st st-<status>)
	Label    string // its type, or a db_function task's function, cut to fit the box
	Sub      string // "#id · status"
	Tooltip  string
	External bool // of another workflow
	X, Y     int
	Layer    int
}

// graphEdge is a parent → child edge, drawn as a curve from the parent's right side to the
// child's left side.
type graphEdge struct {
	From, To int64
	Path     string
	Class    string // the child's status, for its colour
}

const (
	graphNodeW  = 216
	graphNodeH  = 40
	graphColGap = 64
	graphRowGap = 14
	graphMargin = 12
	graphTypeN  = 26 // runes of a label shown in a box (the whole of it is in its tooltip)
)

// layoutWorkflow places nodes (in id order: parents before children) in layers by depth and,
// within a layer, near their parents (the mean row of their parents, then id), and routes the
// edges between nodes drawn.
func layoutWorkflow(prefix string, nodes []wfNode) workflowGraph {
	slices.SortFunc(nodes, func(a, b wfNode) int { return cmpInt64(a.ID, b.ID) })
	index := make(map[int64]int, len(nodes))
	for i, n := range nodes {
		index[n.ID] = i
	}
	depth := make([]int, len(nodes))
	layers := 0
	for i, n := range nodes {
		for _, p := range n.Parents {
			if j, ok := index[p]; ok && j < i {
				depth[i] = max(depth[i], depth[j]+1)
			}
		}
		layers = max(layers, depth[i]+1)
	}
	byLayer := make([][]int, layers)
	for i := range nodes {
		byLayer[depth[i]] = append(byLayer[depth[i]], i)
	}
	row := make([]float64, len(nodes))
	rows := 0
	for l, members := range byLayer {
		key := make(map[int]float64, len(members))
		for _, i := range members {
			sum, k := 0.0, 0
			for _, p := range nodes[i].Parents {
				if j, ok := index[p]; ok && depth[j] < l {
					sum += row[j]
					k++
				}
			}
			if k > 0 {
				key[i] = sum / float64(k)
			} else {
				key[i] = float64(i) // roots keep id order
			}
		}
		slices.SortStableFunc(members, func(a, b int) int {
			switch {
			case key[a] < key[b]:
				return -1
			case key[a] > key[b]:
				return 1
			}
			return a - b
		})
		for r, i := range members {
			row[i] = float64(r)
		}
		rows = max(rows, len(members))
	}
	g := workflowGraph{
		Layers: layers, NodeW: graphNodeW, NodeH: graphNodeH,
		Width:  2*graphMargin + layers*graphNodeW + max(layers-1, 0)*graphColGap,
		Height: 2*graphMargin + rows*graphNodeH + max(rows-1, 0)*graphRowGap,
	}
	g.Nodes = make([]graphNode, len(nodes))
	for i, n := range nodes {
		x := graphMargin + depth[i]*(graphNodeW+graphColGap)
		// Each layer is centred on the tallest.
		offset := (rows - len(byLayer[depth[i]])) * (graphNodeH + graphRowGap) / 2
		y := graphMargin + offset + int(row[i])*(graphNodeH+graphRowGap)
		label, kind := n.Type, n.Type
		if n.Function != nil && *n.Function != "" {
			label, kind = *n.Function, n.Type+" "+*n.Function
		}
		tip := kind + " · task " + strconv.FormatInt(n.ID, 10) + " · " + string(n.Status)
		if n.Attempt > 0 {
			tip += " · attempt " + strconv.Itoa(n.Attempt)
		}
		if n.External {
			tip += " · of workflow " + workflowOf(n)
		}
		if n.LastError != nil && *n.LastError != "" {
			tip += "\n" + truncate(300, redactText(*n.LastError))
		}
		sub := "#" + strconv.FormatInt(n.ID, 10) + " · " + string(n.Status)
		if n.External {
			sub = "#" + strconv.FormatInt(n.ID, 10) + " · other workflow"
		}
		g.Nodes[i] = graphNode{
			ID: n.ID, Href: prefix + "/tasks/" + strconv.FormatInt(n.ID, 10), Status: n.Status,
			Class: statusClass(n.Status), Label: truncate(graphTypeN, label), Sub: sub, Tooltip: tip,
			External: n.External, X: x, Y: y, Layer: depth[i],
		}
	}
	for i, n := range nodes {
		for _, p := range n.Parents {
			j, ok := index[p]
			if !ok {
				continue
			}
			a, b := g.Nodes[j], g.Nodes[i]
			x1, y1 := a.X+graphNodeW, a.Y+graphNodeH/2
			x2, y2 := b.X-2, b.Y+graphNodeH/2 // the arrowhead ends at the box
			mid := (x1 + x2) / 2
			g.Edges = append(g.Edges, graphEdge{
				From: p, To: n.ID, Class: "wf-edge-" + string(n.Status),
				Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2, y2),
			})
		}
	}
	return g
}

func workflowOf(n wfNode) string {
	if n.Workflow != nil {
		return strconv.FormatInt(*n.Workflow, 10)
	}
	return strconv.FormatInt(n.ID, 10)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
