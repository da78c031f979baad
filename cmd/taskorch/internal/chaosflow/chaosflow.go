// Package chaosflow is the chaos harness's durable Go workflow (docs/testing.md, "Chaos"): a
// stock `taskorch worker` registers it only when TASKORCH_CHAOS_WORKFLOWS=true, which the
// harness sets and nothing else should. Each durable call leaves a witness in the chaos fixture's
// tables (cmd/taskorch/internal/chaos/fixture.sql), from which the checker proves that every
// StepTx's effect committed exactly once, every Step ran at least once and always with the same
// StepKey, and every workflow completed once.
package chaosflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
)

// EnvVar is the worker's environment variable that registers the workflow: "true" registers it.
const EnvVar = "TASKORCH_CHAOS_WORKFLOWS"

// TaskType is the workflow's task type.
const TaskType = "chaos.durable"

// SignalName is the name of the signal each workflow awaits (and of its AwaitSignal call), under
// its key; the payload is
// {"key": KEY}.
const SignalName = "chaos.durable"

// SignalTimeout bounds the wait for the signal: far past any run's drain, so that a signal lost
// leaves the workflow pending (and the checker counts it lost) rather than timing out.
const SignalTimeout = time.Hour

// Args is the workflow's payload.
type Args struct {
	// Key is the workload key (f123): unique per workflow.
	Key string `json:"key"`
	// SleepMS is the workflow's Sleep.
	SleepMS int `json:"sleep_ms"`
	// LingerMS is how long each Step waits after its effect, before its checkpoint, so that
	// faults find steps between the two (and they run again).
	LingerMS int `json:"linger_ms"`
	// ChildMS is the spawned child's sleep (a taskorch.sleep task).
	ChildMS int `json:"child_ms"`
}

// TaskType returns "chaos.durable".
func (Args) TaskType() string { return TaskType }

// childArgs is the spawned child: a taskorch.sleep task (the stock worker's built-in handler)
// that names its workflow, so that a child spawned twice is seen.
type childArgs struct {
	SpawnedBy string `json:"spawned_by"`
	Millis    int    `json:"ms"`
}

func (childArgs) TaskType() string { return "taskorch.sleep" }

// Register adds the workflow to hs. db is the worker's pool: the Steps write their witness
// through it, outside any transaction (a Step's effect is not atomic with its checkpoint).
//
// The workflow: StepTx effect-1, Step step-1, Sleep nap, Spawn child, Await child, AwaitSignal
// chaos.durable (the signal of that name, under the key), Step step-2, StepTx effect-2 (which records the signal's payload).
func Register(hs *taskorch.Handlers, db *pgxpool.Pool) {
	taskorch.AddWorkflow(hs, func(ctx context.Context, wf *taskorch.Workflow, a Args) error {
		if a.Key == "" {
			return taskorch.Discard(errors.New("chaos.durable: no key"))
		}
		stepTx := func(name string, payload []byte) error {
			_, err := taskorch.StepTx(wf, name, func(ctx context.Context, tx pgx.Tx) (bool, error) {
				_, err := tx.Exec(ctx, `select chaos.record_durable_effect($1, $2, $3)`, a.Key, name, payload)
				return err == nil, err
			})
			return err
		}
		step := func(name string) error {
			_, err := taskorch.Step(wf, name, func(ctx context.Context) (string, error) {
				key := taskorch.StepKey(ctx)
				if _, err := db.Exec(ctx, `select chaos.record_durable_step($1, $2, $3)`, a.Key, name, key); err != nil {
					return "", err
				}
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(time.Duration(a.LingerMS) * time.Millisecond):
				}
				return key, nil
			})
			return err
		}

		if err := stepTx("effect-1", nil); err != nil {
			return err
		}
		if err := step("step-1"); err != nil {
			return err
		}
		if err := wf.Sleep("nap", time.Duration(a.SleepMS)*time.Millisecond); err != nil {
			return err
		}
		child, err := taskorch.Spawn(wf, "child", childArgs{SpawnedBy: a.Key, Millis: a.ChildMS}, nil)
		if err != nil {
			return err
		}
		if _, err := wf.Await("child", child); err != nil {
			return err
		}
		payload, received, err := taskorch.AwaitSignal[map[string]any](wf, SignalName, a.Key, SignalTimeout)
		if err != nil {
			return err
		}
		if !received {
			return taskorch.Discard(fmt.Errorf("chaos.durable %s: the signal did not come within %s", a.Key, SignalTimeout))
		}
		if err := step("step-2"); err != nil {
			return err
		}
		b, err := json.Marshal(payload)
		if err != nil {
			return err
		}
		return stepTx("effect-2", b)
	})
}
