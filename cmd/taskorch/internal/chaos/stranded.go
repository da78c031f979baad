package chaos

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed stranded.sql
var strandedSQL string

// kill is one SIGKILL of a worker: which worker id, when (the harness's clock, just before the
// signal), and whether the worker was started again under the same id.
type kill struct {
	Worker string    `json:"worker"`
	At     time.Time `json:"at"`
	SameID bool      `json:"same_id"`
}

// recordKill remembers a kill for the stranded-time report.
func (e *env) recordKill(k kill) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kills = append(e.kills, k)
}

// sameIDNext says whether the next killed worker is started again under the same worker id:
// every other kill, so both a new process under a new id and one that takes over its
// predecessor's id are measured.
func (e *env) sameIDNext() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.kills)%2 == 1
}

// KillReport is what became of the tasks a killed worker held: the leases it held at the kill
// that ended after it, how each ended, and how long the slowest waited.
type KillReport struct {
	Worker string    `json:"worker"`
	At     time.Time `json:"at"`
	SameID bool      `json:"same_id"`
	// Held is the number of leases the worker held at the kill that ended after it.
	Held int `json:"held"`
	// By counts those leases by how they ended (see strandedWays).
	By map[string]int `json:"by"`
	// Stranded is, of the leases released by a recovery path (anything but the dying worker's
	// own last outcomes), the longest time from the kill until the task was back to pending
	// (or dead): 0 when there was none.
	Stranded time.Duration `json:"stranded"`
	// Released is the number of those leases.
	Released int `json:"released"`
}

// strandedWays are the ways a killed worker's lease ends, as stranded.sql names them, in the
// order of the report. "finished" (the dying worker's own outcome, in flight at the kill) is
// not a release and is left out of the stranded time.
var strandedWays = []string{"session", "restart", "heartbeat", "lease_expired", "other", "finished"}

// strandedTimes computes a KillReport for each kill from the database, after the drain.
func strandedTimes(ctx context.Context, db Querier, kills []kill) ([]KillReport, error) {
	if len(kills) == 0 {
		return nil, nil
	}
	workers := make([]string, len(kills))
	ats := make([]time.Time, len(kills))
	for i, k := range kills {
		workers[i], ats[i] = k.Worker, k.At
	}
	rows, err := db.Query(ctx, strandedSQL, workers, ats)
	if err != nil {
		return nil, fmt.Errorf("stranded times: %w", err)
	}
	type row struct {
		Kill     int
		Way      string
		Stranded time.Duration
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		var secs float64
		err := r.Scan(&x.Kill, &x.Way, &secs)
		x.Stranded = time.Duration(secs * float64(time.Second))
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("stranded times: %w", err)
	}
	out := make([]KillReport, len(kills))
	for i, k := range kills {
		out[i] = KillReport{Worker: k.Worker, At: k.At, SameID: k.SameID, By: map[string]int{}}
	}
	for _, x := range got {
		r := &out[x.Kill-1]
		r.Held++
		r.By[x.Way]++
		if x.Way != "finished" {
			r.Released++
			r.Stranded = max(r.Stranded, x.Stranded)
		}
	}
	return out, nil
}

// printKills writes the stranded-time table: one line per kill that held tasks, then the
// distribution over them.
func printKills(w io.Writer, kills []KillReport) {
	if len(kills) == 0 {
		return
	}
	fmt.Fprintf(w, "\nstranded time per worker kill (from the SIGKILL until each task it held was back to pending):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "kill\tworker\trestarted as\theld\treleased\tstranded\thow\t\n")
	var times []time.Duration
	ways := map[string]int{}
	for i, k := range kills {
		as := "new id"
		if k.SameID {
			as = "same id"
		}
		var how []string
		for _, way := range strandedWays {
			if n := k.By[way]; n > 0 {
				how = append(how, fmt.Sprintf("%s %d", way, n))
				ways[way] += n
			}
		}
		stranded := "-"
		if k.Released > 0 {
			stranded = k.Stranded.Round(10 * time.Millisecond).String()
			times = append(times, k.Stranded)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t\n", i+1, k.Worker, as, k.Held, k.Released, stranded, strings.Join(how, ", "))
	}
	_ = tw.Flush()
	if len(times) == 0 {
		fmt.Fprintf(w, "no kill caught a worker holding a task\n")
		return
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	pct := func(p float64) time.Duration { return times[min(len(times)-1, int(p*float64(len(times))))] }
	var how []string
	for _, way := range strandedWays {
		if ways[way] > 0 {
			how = append(how, fmt.Sprintf("%s %d", way, ways[way]))
		}
	}
	fmt.Fprintf(w, "%d kills held tasks: stranded median %s, p90 %s, max %s; leases ended by %s\n",
		len(times), pct(0.5).Round(10*time.Millisecond), pct(0.9).Round(10*time.Millisecond),
		slices.Max(times).Round(10*time.Millisecond), strings.Join(how, ", "))
}
