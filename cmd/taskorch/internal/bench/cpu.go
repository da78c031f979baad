package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taskorch/taskorch/internal/humanize"
)

// CPU time is the figure that survives a busy machine: wall-clock throughput drops when other
// work shares the cores, but the CPU a task costs stays about the same. A run reports the CPU
// time the benchmark process used (the client: workers, enqueuers) and, when the server runs
// on this machine and /proc shows it, the CPU time of the whole PostgreSQL cluster (every
// backend, the WAL writer, the checkpointer, autovacuum), each per task.

// clockTicks is the unit of utime and stime in /proc/PID/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// cpuSample is the CPU time used so far by the client and by the server.
type cpuSample struct {
	client time.Duration
	server time.Duration // 0 when the server is not visible
}

// findPostmaster finds the local PostgreSQL server's postmaster through /proc, from a backend's
// pid; 0 when the server is elsewhere (or /proc is not there).
func (e *Env) findPostmaster(ctx context.Context) int {
	var backend int
	if err := e.admin.QueryRow(ctx, `select pg_backend_pid()`).Scan(&backend); err != nil {
		return 0
	}
	st, err := readStat(backend)
	if err != nil || !strings.HasPrefix(st.comm, "postgres") {
		return 0 // not a process of this machine (or another with the same pid)
	}
	pm, err := readStat(st.ppid)
	if err != nil || !strings.HasPrefix(pm.comm, "postgres") {
		return 0
	}
	return st.ppid
}

// cpuNow samples the CPU time used so far.
func (e *Env) cpuNow() cpuSample {
	var s cpuSample
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if e.postmaster != 0 {
		s.server = clusterCPU(e.postmaster)
	}
	return s
}

// clusterCPU is the CPU time of a PostgreSQL cluster: the postmaster's own, its reaped
// children's (backends that exited), and its live children's.
func clusterCPU(postmaster int) time.Duration {
	pm, err := readStat(postmaster)
	if err != nil {
		return 0
	}
	ticks := pm.utime + pm.stime + pm.cutime + pm.cstime
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != postmaster {
			continue
		}
		ticks += st.utime + st.stime
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

type procStat struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64
}

// readStat reads the fields of /proc/PID/stat that clusterCPU needs.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[closing+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	num := func(i int) int64 { n, _ := strconv.ParseInt(f[i-3], 10, 64); return n }
	return procStat{comm: s[open+1 : closing], ppid: int(num(4)),
		utime: num(14), stime: num(15), cutime: num(16), cstime: num(17)}, nil
}

// CPUCost is the CPU time a run used, per unit of work (a task, a process), in microseconds.
type CPUCost struct {
	// Client is the benchmark process (workers, enqueuers, the Go runtime).
	Client float64 `json:"client_us"`
	// Server is the PostgreSQL cluster; absent when the server is not on this machine.
	Server float64 `json:"server_us,omitempty"`
	// IdleMachineRate is CPUs × 1 s / (Client + Server): the rate the machine's cores could
	// sustain for this work if nothing else ran and nothing waited (fsync, locks); an upper
	// bound that does not move with the load. Absent without Server.
	IdleMachineRate float64 `json:"idle_machine_rate,omitempty"`
}

func (c CPUCost) String() string {
	if c.Server == 0 {
		return fmt.Sprintf("%.1f µs client", c.Client)
	}
	return fmt.Sprintf("%.1f µs client + %.1f µs server = %.1f µs (the cores could do %s/s)",
		c.Client, c.Server, c.Client+c.Server, humanize.Thousands(int64(c.IdleMachineRate)))
}

// cost is the CPU used between a and b, per unit of n units.
func cpuCost(a, b cpuSample, n int64, cpus int) CPUCost {
	if n <= 0 {
		return CPUCost{}
	}
	per := func(d time.Duration) float64 { return round1(float64(d.Microseconds()) / float64(n)) }
	c := CPUCost{Client: per(b.client - a.client)}
	if a.server > 0 && b.server > 0 {
		c.Server = per(b.server - a.server)
		if sum := c.Client + c.Server; sum > 0 {
			c.IdleMachineRate = round1(float64(cpus) * 1e6 / sum)
		}
	}
	return c
}
