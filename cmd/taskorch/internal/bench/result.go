package bench

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Header is what every result starts with: the mode, where it ran, and how busy the machine was
// (the figures are only comparable with the load they were measured under).
type Header struct {
	Mode string `json:"mode"`
	Info
	StartedAt time.Time `json:"started_at"`
	CPUs      int       `json:"cpus"`
	// LoadBefore and LoadAfter are the 1, 5 and 15-minute load averages (/proc/loadavg) when the
	// run started and ended; absent where the system has no /proc.
	LoadBefore []float64 `json:"load_average_before,omitempty"`
	LoadAfter  []float64 `json:"load_average_after,omitempty"`
}

// Row is one line of a result's table.
type Row struct{ Name, Value string }

// Result is what a mode returns: printed as a table, or as JSON.
type Result interface {
	// Table lists the figures for a person to read.
	Table() []Row
}

func (e *Env) header(mode string) Header {
	return Header{Mode: mode, Info: e.Info, StartedAt: time.Now().UTC().Truncate(time.Millisecond),
		CPUs: runtime.NumCPU(), LoadBefore: loadAverage()}
}

func (h *Header) finish() { h.LoadAfter = loadAverage() }

func (h *Header) headerRows() []Row {
	db := h.Database
	switch {
	case h.DatabaseCreated && h.Kept:
		db += " (created for the run, kept)"
	case h.DatabaseCreated:
		db += " (created for the run, dropped after)"
	default:
		db += " (in place)"
	}
	load := func(l []float64) string {
		if len(l) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2])
	}
	return []Row{
		{"mode", h.Mode},
		{"database", db},
		{"server", fmt.Sprintf("PostgreSQL %s, fsync=%s, synchronous_commit=%s, full_page_writes=%s, shared_buffers=%s",
			h.ServerVersion, h.Fsync, h.SynchronousCommit, h.FullPageWrites, h.SharedBuffers)},
		{"machine", fmt.Sprintf("%d CPUs, load average %s before, %s after", h.CPUs, load(h.LoadBefore), load(h.LoadAfter))},
	}
}

// loadAverage reads /proc/loadavg; nil where there is none.
func loadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return nil
	}
	out := make([]float64, 3)
	for i := range out {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// percentiles computes nearest-rank percentiles of ds (which it sorts).
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ms(ds[max(0, min(i, len(ds)-1))])
	}
	return Percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(ds[len(ds)-1])}
}

func (p Percentiles) String() string {
	return fmt.Sprintf("p50 %s ms, p90 %s ms, p99 %s ms, max %s ms", fmtMS(p.P50), fmtMS(p.P90), fmtMS(p.P99), fmtMS(p.Max))
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func fmtMS(f float64) string {
	if f >= 100 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round1(float64(n) / d.Seconds())
}

func seconds(d time.Duration) float64 { return round3(d.Seconds()) }
