package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// phase is one part of the run: its workers and the faults of its network lane.
type phase struct {
	name    string
	weight  float64
	network []string
	setup   func(ctx context.Context) error
}

// plan returns the run's phases.
func (e *env) plan() []phase {
	hostSlots := func(prefix string, env ...string) []*slot {
		var out []*slot
		for i := 1; i <= e.cfg.Workers; i++ {
			out = append(out, &slot{name: fmt.Sprintf("%s%d", prefix, i), dbURL: e.pgProxyURL, env: env})
		}
		return out
	}
	// switchTo starts the next phase's workers, then stops the previous phase's gracefully.
	switchTo := func(next []*slot) func(context.Context) error {
		return func(context.Context) error {
			prev := e.fleet.snapshot()
			if err := e.fleet.add(next...); err != nil {
				return err
			}
			e.fleet.retire(prev, 15*time.Second)
			return nil
		}
	}
	phases := []phase{{
		name: "postgres", weight: 0.5,
		network: []string{FaultPGRestart, FaultPGCrash, FaultLatency, FaultReset, FaultProxyDown},
		setup:   switchTo(hostSlots("pg")),
	}}
	if !e.cfg.NoRedis {
		phases = append(phases, phase{
			name: "redis", weight: 0.25,
			network: []string{FaultRedisRestart, FaultRedisRestart, FaultLatency},
			setup: switchTo(hostSlots("redis", "TASKORCH_TRANSPORT=redis", "TASKORCH_REDIS_URL="+e.redis.url(),
				"TASKORCH_REDISPATCH_AFTER=2s")),
		})
	}
	if !e.cfg.NoNetns {
		next := hostSlots("host")
		for i, n := range e.netns {
			next = append(next, &slot{name: fmt.Sprintf("ns%d", i+1), dbURL: n.dbURL, ns: n})
		}
		phases = append(phases, phase{
			name: "netns", weight: 0.25, network: []string{FaultNetnsCut},
			setup: switchTo(next),
		})
	}
	return phases
}

// required lists the fault kinds this run must have injected.
func (e *env) required() []string {
	var out []string
	for _, p := range e.plan() {
		out = append(out, p.network...)
	}
	out = append(out, FaultKill, FaultPause)
	slices.Sort(out)
	return slices.Compact(out)
}

// runPhases runs each phase: its setup, then both lanes of faults until its time is up.
func (e *env) runPhases(ctx context.Context) error {
	phases := e.plan()
	var total float64
	for _, p := range phases {
		total += p.weight
	}
	for i, p := range phases {
		start := time.Now()
		if err := p.setup(ctx); err != nil {
			return err
		}
		if i == 0 {
			if err := e.waitWorkers(ctx, e.cfg.Workers); err != nil {
				return err
			}
		}
		d := time.Duration(float64(e.cfg.Duration) * p.weight / total)
		until := start.Add(d)
		e.log.Info("chaos: phase", "phase", p.name, "for", d.Round(time.Second), "workers", len(e.fleet.snapshot()))
		before := e.faultCounts()
		var wg sync.WaitGroup
		wg.Go(func() { e.lane(ctx, until, []string{FaultKill, FaultPause}) })
		wg.Go(func() { e.lane(ctx, until, p.network) })
		wg.Wait()
		if err := e.err(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		after := e.faultCounts()
		for k, v := range before {
			after[k] -= v
		}
		e.phases = append(e.phases, PhaseReport{Name: p.name, Duration: time.Since(start), Faults: after})
	}
	return nil
}

// waitWorkers waits until n workers are registered.
func (e *env) waitWorkers(ctx context.Context, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var got int
		_ = e.pool.QueryRow(ctx, `select count(*) from queues.worker`).Scan(&got)
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: only %d of %d workers registered within a minute (logs in %s)", got, n, e.dir)
		}
		e.sleep(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// lane injects faults of kinds one after another until the time is up: first each kind once,
// in random order, then at random.
func (e *env) lane(ctx context.Context, until time.Time, kinds []string) {
	order := slices.Clone(kinds)
	for i := len(order) - 1; i > 0; i-- {
		j := e.rng.IntN(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	e.sleep(ctx, e.rng.between(time.Second, 3*time.Second)) // let the phase's workers settle
	for n := 0; time.Now().Before(until) && ctx.Err() == nil && e.err() == nil; n++ {
		kind := kinds[e.rng.IntN(len(kinds))]
		if n < len(order) {
			kind = order[n]
		}
		detail, err := e.inject(ctx, kind)
		switch {
		case errors.Is(err, errNoTarget):
		case err != nil && ctx.Err() == nil:
			e.setErr(fmt.Errorf("chaos: fault %s: %w", kind, err))
			return
		case err == nil:
			e.mu.Lock()
			e.faults[kind]++
			e.mu.Unlock()
			e.log.Info("chaos: fault", "kind", kind, "what", detail)
		}
		gap := e.rng.between(500*time.Millisecond, 3*time.Second)
		e.sleep(ctx, min(gap, time.Until(until)))
	}
}

func (e *env) faultCounts() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for k, v := range e.faults {
		out[k] = v
	}
	return out
}

// drain waits, with every fault undone, until no task is pending or running; it returns how
// many still are when Config.Drain runs out.
func (e *env) drain(ctx context.Context) (int64, error) {
	if err := e.proxy.reset(ctx); err != nil {
		return 0, err
	}
	for _, n := range e.netns {
		if err := n.heal(ctx); err != nil {
			return 0, err
		}
	}
	e.log.Info("chaos: faults over; draining", "at_most", e.cfg.Drain)
	deadline := time.Now().Add(e.cfg.Drain)
	for {
		var open int64
		err := e.pool.QueryRow(ctx, `select count(*) from queues.task where status in ('pending', 'running')`).Scan(&open)
		if err == nil && open == 0 {
			return 0, nil
		}
		if time.Now().After(deadline) {
			return open, nil
		}
		e.sleep(ctx, 500*time.Millisecond)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
}

// progress logs the run's state every 10 s.
func (e *env) progress(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		exp, _ := e.prod.committed()
		var faults int
		for _, v := range e.faultCounts() {
			faults += v
		}
		var total, open int64
		if err := e.pool.QueryRow(ctx, `select count(*), count(*) filter (where status in ('pending', 'running')) from queues.task`).Scan(&total, &open); err != nil {
			e.log.Info("chaos: progress", "enqueued", exp.Total(), "of", e.cfg.Tasks, "faults", faults, "database", "unreachable")
			continue
		}
		e.log.Info("chaos: progress", "enqueued", exp.Total(), "of", e.cfg.Tasks, "tasks", total, "open", open, "faults", faults)
	}
}
