package dashboard

import (
	"context"
	"embed"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskorch/taskorch/internal/admin"
)

//go:embed sql/*.sql
var sqlFS embed.FS

// sqlText returns the query in sql/<name>.sql.
func sqlText(name string) string {
	b, err := sqlFS.ReadFile("sql/" + name + ".sql")
	if err != nil {
		panic("dashboard: missing query " + name) // embedded: a build error in disguise
	}
	return string(b)
}

var (
	statusCountsSQL  = sqlText("status_counts")
	eventBoundarySQL = sqlText("event_boundary")
	eventBucketsSQL  = sqlText("event_buckets")
	completionsSQL   = sqlText("completion_buckets")
)

// countCap bounds each count of the overview: beyond it, the page says "10,000+" (a count
// reads every entry it counts).
const countCap = 10_000

// maxChartEvents bounds the events, and the completed tasks, a chart reads: at a high rate the
// chart covers the most recent ones only, and says so.
const maxChartEvents = 1_000_000

// statusCounts are the overview's tiles.
type statusCounts struct {
	Due, Scheduled, Running, Completed, Failed, Dead, Cancelled int64
	Estimate                                                    int64 // all tasks, the planner's estimate
	Cap                                                         int64
}

// Total is all tasks: the planner's estimate, or the counts when they are more (a table not
// analyzed yet has no estimate).
func (c statusCounts) Total() int64 {
	return max(c.Estimate, c.Due+c.Scheduled+c.Running+c.Completed+c.Failed+c.Dead+c.Cancelled)
}

// queueRow is one task type's backlog and pause state.
type queueRow = admin.Queue

// chartWindow is a chart's span and bucket width.
type chartWindow struct {
	Name   string
	Span   time.Duration
	Bucket time.Duration
}

var chartWindows = []chartWindow{
	{"15m", 15 * time.Minute, 15 * time.Second},
	{"1h", time.Hour, time.Minute},
	{"6h", 6 * time.Hour, 6 * time.Minute},
	{"24h", 24 * time.Hour, 24 * time.Minute},
}

func windowByName(name string) chartWindow {
	for _, w := range chartWindows {
		if w.Name == name {
			return w
		}
	}
	return chartWindows[1]
}

type overviewData struct {
	Counts      statusCounts
	Queues      []queueRow
	Throughput  barChart
	Failures    barChart
	Window      chartWindow
	Windows     []chartWindow
	Partial     bool // the charts cover only the most recent maxChartEvents events or completions
	OldestDue   float64
	Workers     int
	Leader      string
	FailureRate string
	Failed      failedProcesses // the "Failed processes" card
}

func (h *Handler) overviewPage(w http.ResponseWriter, r *http.Request) {
	d := overviewData{Window: windowByName(r.URL.Query().Get("window")), Windows: chartWindows}
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if d.Counts, err = readStatusCounts(ctx, tx); err != nil {
			return err
		}
		if d.Queues, err = readQueues(ctx, tx); err != nil {
			return err
		}
		for _, q := range d.Queues {
			d.OldestDue = max(d.OldestDue, q.OldestDueSeconds)
		}
		if err := h.readCharts(ctx, tx, &d); err != nil {
			return err
		}
		ws, err := admin.ListWorkers(ctx, tx)
		if err != nil {
			return err
		}
		d.Workers = len(ws)
		for _, w := range ws {
			if w.Leader {
				d.Leader = w.ID
			}
		}
		d.Failed, err = readFailedProcesses(ctx, tx)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "overview", "Overview", "overview", d)
}

func readStatusCounts(ctx context.Context, tx pgx.Tx) (statusCounts, error) {
	c := statusCounts{Cap: countCap}
	err := tx.QueryRow(ctx, statusCountsSQL, countCap).Scan(&c.Due, &c.Scheduled, &c.Running, &c.Completed,
		&c.Failed, &c.Dead, &c.Cancelled, &c.Estimate)
	return c, err
}

func readQueues(ctx context.Context, tx pgx.Tx) ([]queueRow, error) {
	return admin.ListQueues(ctx, tx)
}

// readCharts draws completions and failed attempts per bucket over the window: completions
// from the tasks' rows, failed attempts from queues.task_event and from tasks completed although
// their call failed.
func (h *Handler) readCharts(ctx context.Context, tx pgx.Tx, d *overviewData) error {
	var now time.Time
	if err := tx.QueryRow(ctx, `select now()`).Scan(&now); err != nil {
		return err
	}
	win := d.Window
	end := now.Truncate(win.Bucket).Add(win.Bucket) // the current bucket is the last bar
	start := end.Add(-win.Span)
	var boundary, maxID int64
	if err := tx.QueryRow(ctx, eventBoundarySQL, start).Scan(&boundary, &maxID); err != nil {
		return err
	}
	from := boundary
	if maxID-from > maxChartEvents {
		from = maxID - maxChartEvents
		d.Partial = true
	}
	n := int(win.Span / win.Bucket)
	completed, failures := make([]int64, n), make([]int64, n)
	rows, err := tx.Query(ctx, eventBucketsSQL, start, win.Bucket, from)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var bucket time.Time
		var f int64
		if err := rows.Scan(&bucket, &f); err != nil {
			return err
		}
		if i := int(bucket.Sub(start) / win.Bucket); i >= 0 && i < n {
			failures[i] += f
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	if rows, err = tx.Query(ctx, completionsSQL, start, win.Bucket, maxChartEvents); err != nil {
		return err
	}
	defer rows.Close()
	var read int64
	for rows.Next() {
		var bucket time.Time
		var c, f, m int64
		if err := rows.Scan(&bucket, &c, &f, &m); err != nil {
			return err
		}
		read += m
		if i := int(bucket.Sub(start) / win.Bucket); i >= 0 && i < n {
			completed[i] += c
			failures[i] += f
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if read >= maxChartEvents {
		d.Partial = true
	}
	d.Throughput = newBarChart("Completed", "bars-ok", start, win.Bucket, completed)
	d.Failures = newBarChart("Failed attempts", "bars-bad", start, win.Bucket, failures)
	d.FailureRate = percent(d.Failures.Total, d.Failures.Total+d.Throughput.Total)
	return nil
}

type queuesData struct {
	Queues []queueRow
}

// queuesPage lists the task types (admin.ListQueues), with pause and resume.
func (h *Handler) queuesPage(w http.ResponseWriter, r *http.Request) {
	var d queuesData
	err := h.readTx(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		d.Queues, err = readQueues(ctx, tx)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "queues", "Queues", "queues", d)
}
