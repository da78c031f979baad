package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/chaosflow"
)

// Kinds of workload item.
const (
	itemGo         = iota // a Go task: taskorch.noop, or taskorch.sleep
	itemDBFunction        // chaos.apply_effect: an effect row, maybe a child task
	itemEmail             // an email process (comms.send_email) delivered by the outbox
	itemWorkflow          // chaos.enqueue_workflows: a diamond or a chain of chaos.apply_effect tasks
	itemDurable           // chaos.durable: a durable Go workflow (chaosflow), then its signal
)

// item is one unit of workload.
type item struct {
	kind    int
	key     string // unique: g123, d124, e125
	typ     string // task type (Go and db_function items); diamond or chain (workflow items)
	payload []byte // task payload (Go and db_function items)
	to      string // recipient (email items)
	expect  string // email items: "sent" or "gave_up"
	// signalAfter is how long after its commit a durable workflow's signal is sent (at most a
	// twentieth of the run: see producer.run).
	signalAfter time.Duration
}

// makeWorkload returns n items: 66% Go tasks (15% of them sleeping 100-1000 ms, so faults
// find them running), 16% db_function tasks (a fifth sleeping 50-500 ms in the database, 2%
// sleeping 4-8 s there, past the workers' lease; 30% enqueueing a child), 4% workflows of
// db_function tasks that wait for one another (docs/workflows.md; half diamonds a → b, c → d,
// half chains a → b → c; chaos.enqueue_workflows), 4% durable Go workflows (chaos.durable:
// StepTx, Step, a Sleep of 0.5-3 s, Spawn and Await of a child, AwaitSignal — the signal sent
// 0-8 s after the workflow — Step, StepTx; chaosflow), 10% email processes (a tenth to a
// recipient whose first delivery fails, 3% to one that always fails, so the process gives up).
func makeWorkload(n int, rng *rand.Rand) []item {
	items := make([]item, n)
	for i := range items {
		it := &items[i]
		switch r := rng.Float64(); {
		case r < 0.66:
			it.kind, it.key = itemGo, fmt.Sprintf("g%d", i)
			if rng.Float64() < 0.15 {
				it.typ = "taskorch.sleep"
				it.payload, _ = json.Marshal(map[string]any{"key": it.key, "ms": 100 + rng.IntN(901)})
			} else {
				it.typ = "taskorch.noop"
				it.payload, _ = json.Marshal(map[string]any{"key": it.key})
			}
		case r < 0.86:
			it.kind, it.key, it.typ = itemDBFunction, fmt.Sprintf("d%d", i), "db_function"
			p := map[string]any{"db_function": "chaos.apply_effect", "key": it.key}
			switch r := rng.Float64(); {
			case r < 0.02:
				// Longer than the lease (3 s by default): its transaction is open while the
				// worker renews the leases of the tasks beside it (docs/design.md, "Which
				// statement locks what").
				p["sleep_ms"] = 4000 + rng.IntN(4001)
			case r < 0.22:
				p["sleep_ms"] = 50 + rng.IntN(451)
			}
			if rng.Float64() < 0.30 {
				p["child"] = true
			}
			it.payload, _ = json.Marshal(p)
		case r < 0.90:
			it.kind, it.key, it.typ = itemWorkflow, fmt.Sprintf("wd%d", i), "diamond"
			if rng.Float64() < 0.5 {
				it.key, it.typ = fmt.Sprintf("wc%d", i), "chain"
			}
		case r < 0.94:
			it.kind, it.key, it.typ = itemDurable, fmt.Sprintf("f%d", i), chaosflow.TaskType
			it.payload, _ = json.Marshal(chaosflow.Args{Key: it.key, SleepMS: 500 + rng.IntN(2501),
				LingerMS: rng.IntN(301), ChildMS: rng.IntN(501)})
			it.signalAfter = time.Duration(rng.IntN(8001)) * time.Millisecond
		default:
			it.kind, it.key, it.expect = itemEmail, fmt.Sprintf("e%d", i), "sent"
			switch r := rng.Float64(); {
			case r < 0.10:
				it.to = fmt.Sprintf("once-%s@fail.chaos.test", it.key)
			case r < 0.13:
				it.to, it.expect = "always@fail.chaos.test", "gave_up"
			default:
				it.to = fmt.Sprintf("user-%s@chaos.test", it.key)
			}
		}
	}
	return items
}

// producer enqueues the workload at a steady rate, straight into PostgreSQL (not through the
// proxy: the faults are aimed at the workers). A batch is one transaction and every item
// carries a key, so a batch whose commit was lost in a restart is simply sent again.
type producer struct {
	pool  *pgxpool.Pool
	items []item
	log   *slog.Logger

	// signals are the durable workflows committed whose signal is not sent yet, oldest first;
	// maxSignalAfter caps an item's signalAfter (run sets it). Only run's goroutine uses them.
	signals        []pendingSignal
	maxSignalAfter time.Duration

	mu      sync.Mutex
	sent    int      // items committed
	done    Expected // committed, by kind
	retries int      // batches sent again after an error
}

// pendingSignal is a durable workflow's signal, to be sent at due.
type pendingSignal struct {
	key string
	due time.Time
}

// run enqueues items[:n*elapsed/over] as time passes, and sends each durable workflow its
// signal when it is due (at most over/20 after the workflow), until all are sent or ctx is done.
func (p *producer) run(ctx context.Context, over time.Duration) error {
	start := time.Now()
	p.maxSignalAfter = over / 20
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		frac := float64(time.Since(start)) / float64(over)
		target := min(len(p.items), int(frac*float64(len(p.items)))+1)
		for p.progress() < target {
			from := p.progress()
			to := min(target, from+1000)
			if err := p.send(ctx, p.items[from:to]); err != nil {
				return err
			}
		}
		if err := p.sendSignals(ctx); err != nil {
			return err
		}
		if p.progress() == len(p.items) && len(p.signals) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (p *producer) progress() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// Progress returns what is committed so far.
func (p *producer) committed() (Expected, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done, p.retries
}

// send commits one batch, retrying (the same batch: idempotent) until it commits.
func (p *producer) send(ctx context.Context, batch []item) error {
	var types, payloads, keys, ekeys, tos, expects, wkeys, shapes []string
	var exp Expected
	for _, it := range batch {
		switch it.kind {
		case itemEmail:
			ekeys, tos, expects = append(ekeys, it.key), append(tos, it.to), append(expects, it.expect)
			exp.EmailProcesses++
		case itemWorkflow:
			wkeys, shapes = append(wkeys, it.key), append(shapes, it.typ)
			exp.Workflows++
		default:
			types, payloads, keys = append(types, it.typ), append(payloads, string(it.payload)), append(keys, "chaos-"+it.key)
			switch it.kind {
			case itemGo:
				exp.GoTasks++
			case itemDurable:
				exp.DurableWorkflows++
			default:
				exp.DBFunctionTasks++
			}
		}
	}
	backoff := 100 * time.Millisecond
	for {
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			if len(types) > 0 {
				if _, err := tx.Exec(ctx, `select queues.enqueue_many($1::text[], $2::text[]::jsonb[], _idempotency_keys => $3::text[])`,
					types, payloads, keys); err != nil {
					return err
				}
			}
			if len(wkeys) > 0 {
				if _, err := tx.Exec(ctx, `select chaos.enqueue_workflows($1, $2)`, wkeys, shapes); err != nil {
					return err
				}
			}
			if len(ekeys) > 0 {
				if _, err := tx.Exec(ctx, `select chaos.send_emails($1, $2, $3)`, ekeys, tos, expects); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			p.mu.Lock()
			p.sent += len(batch)
			p.done.GoTasks += exp.GoTasks
			p.done.DBFunctionTasks += exp.DBFunctionTasks
			p.done.EmailProcesses += exp.EmailProcesses
			p.done.Workflows += exp.Workflows
			p.done.DurableWorkflows += exp.DurableWorkflows
			p.mu.Unlock()
			now := time.Now()
			for _, it := range batch {
				if it.kind == itemDurable {
					p.signals = append(p.signals, pendingSignal{key: it.key, due: now.Add(min(it.signalAfter, p.maxSignalAfter))})
				}
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.mu.Lock()
		p.retries++
		p.mu.Unlock()
		p.log.Debug("producer: batch not committed; sending it again", "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// sendSignals sends the signals that are due, in one transaction, retrying (idempotently: first
// emit wins) until it commits.
func (p *producer) sendSignals(ctx context.Context) error {
	var keys []string
	var rest []pendingSignal
	now := time.Now()
	for _, s := range p.signals {
		if s.due.After(now) {
			rest = append(rest, s)
		} else {
			keys = append(keys, s.key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	backoff := 100 * time.Millisecond
	for {
		_, err := p.pool.Exec(ctx, `select chaos.signal_durable($1)`, keys)
		if err == nil {
			p.signals = rest
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.mu.Lock()
		p.retries++
		p.mu.Unlock()
		p.log.Debug("producer: signals not sent; sending them again", "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
