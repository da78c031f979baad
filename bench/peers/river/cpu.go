package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The CPU figures follow taskorch bench's (cmd/taskorch/internal/bench/cpu.go, which this module cannot
// import): the process's own CPU time from getrusage, and the whole local PostgreSQL cluster's
// from /proc (the postmaster, its reaped children and its live children), each per job.

// clockTicks is the unit of utime and stime in /proc/PID/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

type cpuSample struct {
	client time.Duration
	server time.Duration // 0 when the server is not visible
}

// cpuCost is the CPU time per job, in microseconds, under taskorch bench's JSON keys.
type cpuCost struct {
	Client          float64 `json:"client_us"`
	Server          float64 `json:"server_us,omitempty"`
	IdleMachineRate float64 `json:"idle_machine_rate,omitempty"`
}

// findPostmaster finds the local server's postmaster from a backend's pid; 0 when the server
// runs elsewhere or /proc is not there.
func findPostmaster(ctx context.Context, pool *pgxpool.Pool) int {
	var backend int
	if err := pool.QueryRow(ctx, `select pg_backend_pid()`).Scan(&backend); err != nil {
		return 0
	}
	st, err := readStat(backend)
	if err != nil || !strings.HasPrefix(st.comm, "postgres") {
		return 0
	}
	pm, err := readStat(st.ppid)
	if err != nil || !strings.HasPrefix(pm.comm, "postgres") {
		return 0
	}
	return st.ppid
}

func cpuNow(postmaster int) cpuSample {
	var s cpuSample
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if postmaster != 0 {
		s.server = clusterCPU(postmaster)
	}
	return s
}

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

func costOf(a, b cpuSample, n int64, cpus int) cpuCost {
	if n <= 0 {
		return cpuCost{}
	}
	per := func(d time.Duration) float64 { return round1(float64(d.Microseconds()) / float64(n)) }
	c := cpuCost{Client: per(b.client - a.client)}
	if a.server > 0 && b.server > 0 {
		c.Server = per(b.server - a.server)
		if sum := c.Client + c.Server; sum > 0 {
			c.IdleMachineRate = round1(float64(cpus) * 1e6 / sum)
		}
	}
	return c
}
