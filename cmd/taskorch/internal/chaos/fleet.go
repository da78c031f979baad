package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// slot is one worker of the fleet: a `taskorch worker` process that the harness starts again
// after it is killed, under a new worker id (name-generation) or, every other kill, the same.
type slot struct {
	name  string
	dbURL string
	env   []string // transport settings
	ns    *netns   // nil: on the host
	gen   int
	proc  *process
	busy  bool // a fault is acting on it: the watchdog leaves it alone
}

// fleet runs the workers.
type fleet struct {
	bin     string
	dir     string
	baseEnv []string
	log     *slog.Logger

	mu         sync.Mutex
	active     []*slot
	retired    []*slot
	started    int
	unexpected int // workers that exited without being killed or told to stop
}

func (f *fleet) workerEnv(s *slot) []string {
	env := append([]string{}, f.baseEnv...)
	env = append(env, "DATABASE_URL="+s.dbURL, fmt.Sprintf("TASKORCH_WORKER_ID=%s-%d", s.name, s.gen))
	return append(env, s.env...)
}

// start starts a slot's worker (again), under a new worker id. Callers hold no lock.
func (f *fleet) start(s *slot) error { return f.restart(s, false) }

// restart starts a slot's worker again: under the same worker id as the process before it
// (which must be gone: a killed worker's successor takes over its id), or a new one.
func (f *fleet) restart(s *slot, sameID bool) error {
	f.mu.Lock()
	if !sameID || s.gen == 0 {
		s.gen++
	}
	f.started++
	f.mu.Unlock()
	argv := []string{f.bin, "worker"}
	if s.ns != nil {
		argv = append([]string{"ip", "netns", "exec", s.ns.name}, argv...)
	}
	p, err := startProcess(processSpec{
		name: fmt.Sprintf("worker %s-%d", s.name, s.gen), argv: argv, env: f.workerEnv(s), clean: true,
		logPath: filepath.Join(f.dir, "worker-"+s.name+".log"),
	})
	if err != nil {
		return err
	}
	f.mu.Lock()
	s.proc = p
	f.mu.Unlock()
	return nil
}

// add starts new slots and makes them active.
func (f *fleet) add(slots ...*slot) error {
	for _, s := range slots {
		if err := f.start(s); err != nil {
			return err
		}
		f.mu.Lock()
		f.active = append(f.active, s)
		f.mu.Unlock()
	}
	return nil
}

// retire stops the given slots gracefully (SIGTERM; they give back what they hold).
func (f *fleet) retire(slots []*slot, grace time.Duration) {
	f.mu.Lock()
	keep := f.active[:0]
	for _, s := range f.active {
		gone := false
		for _, r := range slots {
			gone = gone || r == s
		}
		if !gone {
			keep = append(keep, s)
		}
	}
	f.active = keep
	f.retired = append(f.retired, slots...)
	for _, s := range slots {
		s.busy = true // the watchdog must not start it again
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range slots {
		wg.Go(func() { s.proc.terminate(grace) })
	}
	wg.Wait()
}

// snapshot returns the active slots.
func (f *fleet) snapshot() []*slot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*slot{}, f.active...)
}

// acquire picks a random active slot that no fault is acting on and marks it busy, or nil.
func (f *fleet) acquire(rng func(int) int, filter func(*slot) bool) *slot {
	f.mu.Lock()
	defer f.mu.Unlock()
	var free []*slot
	for _, s := range f.active {
		if !s.busy && (filter == nil || filter(s)) {
			free = append(free, s)
		}
	}
	if len(free) == 0 {
		return nil
	}
	s := free[rng(len(free))]
	s.busy = true
	return s
}

func (f *fleet) release(s *slot) {
	f.mu.Lock()
	s.busy = false
	f.mu.Unlock()
}

// watch starts again, until ctx is done, any active worker that exited by itself (counted:
// it should not happen).
func (f *fleet) watch(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range f.snapshot() {
			f.mu.Lock()
			dead := !s.busy && s.proc.exited() && slices.Contains(f.active, s)
			if dead {
				s.busy = true
				f.unexpected++
			}
			f.mu.Unlock()
			if !dead {
				continue
			}
			f.log.Warn("a worker exited by itself; starting it again", "worker", fmt.Sprintf("%s-%d", s.name, s.gen),
				"status", fmt.Sprint(s.proc.err), "log", filepath.Join(f.dir, "worker-"+s.name+".log"))
			if err := f.start(s); err != nil {
				f.log.Error("cannot start the worker again", "worker", s.name, "error", err)
			}
			f.release(s)
		}
	}
}

// stopAll stops every worker gracefully.
func (f *fleet) stopAll(grace time.Duration) {
	f.retire(f.snapshot(), grace)
}

// killAll kills every worker still running (cleanup).
func (f *fleet) killAll() {
	f.mu.Lock()
	all := append(append([]*slot{}, f.active...), f.retired...)
	f.mu.Unlock()
	for _, s := range all {
		if s.proc != nil {
			s.proc.kill()
		}
	}
}

// logCounts are what the workers' logs say about fencing.
type logCounts struct {
	Refused   int `json:"refused"`    // outcomes the database refused: "completion refused", "failure refused"
	LeaseLost int `json:"lease_lost"` // tasks cancelled because the renewer found their lease gone
	Reaped    int `json:"reaped"`     // workers told by their heartbeat that they had been reaped
}

// countLogs reads the workers' JSON logs.
func (f *fleet) countLogs() (logCounts, error) {
	var c logCounts
	paths, err := filepath.Glob(filepath.Join(f.dir, "worker-*.log"))
	if err != nil {
		return c, err
	}
	for _, p := range paths {
		fh, err := os.Open(p)
		if err != nil {
			return c, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line := sc.Bytes()
			if !strings.Contains(string(line), `"msg"`) {
				continue
			}
			var rec struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal(line, &rec) != nil {
				continue
			}
			switch {
			case strings.Contains(rec.Msg, "refused: the lease was lost"):
				c.Refused++
			case strings.HasPrefix(rec.Msg, "lease lost"):
				c.LeaseLost++
			case strings.HasPrefix(rec.Msg, "maintenance: this worker was reaped"):
				c.Reaped++
			}
		}
		_ = fh.Close()
		if err := sc.Err(); err != nil {
			return c, fmt.Errorf("%s: %w", p, err)
		}
	}
	return c, nil
}

// lockedRand is a seeded source safe for the lanes' goroutines.
type lockedRand struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (r *lockedRand) IntN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}

// between returns a duration uniform in [lo, hi).
func (r *lockedRand) between(lo, hi time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)))
}
