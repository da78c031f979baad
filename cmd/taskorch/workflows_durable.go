package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskorch/taskorch"
)

// A durable Go workflow (docs/workflows.md, "Durable workflows in Go") is one task whose
// checkpoints are its steps. `taskorch workflows show ID` prints them when task ID has any: on
// their own for a durable workflow, after the graph for a workflow whose first task is one.

// durableWorkflow is a durable workflow as `workflows show` prints it.
type durableWorkflow struct {
	TaskID  int64           `json:"task_id"`
	Type    string          `json:"task_type"`
	Status  taskorch.Status `json:"status"`
	Attempt int             `json:"attempt"`
	Steps   []durableStep   `json:"steps"`
}

// durableStep is one durable call: a checkpoint, or the call in progress that has none yet (a
// run in flight, or an Await whose tasks have not all ended).
type durableStep struct {
	Position int    `json:"position"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	// Status: completed; sleeping or waiting (the workflow is suspended on it); received or
	// timed_out (a signal's outcome); running (the run in flight, past the last checkpoint).
	Status      string          `json:"status"`
	Attempt     int             `json:"attempt,omitempty"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	CompletedAt *time.Time      `json:"completed_at,omitempty"`
	Duration    *float64        `json:"duration_seconds,omitempty"` // from started_at to completed_at
	WaitsFor    string          `json:"waits_for,omitempty"`        // a sleep: time; a signal: its name and key; an await: its tasks
	Until       *time.Time      `json:"until,omitempty"`            // a sleep's end, a signal wait's deadline
	Result      json.RawMessage `json:"result,omitempty"`           // masked like a task's result
}

// loadDurableWorkflow reads task id's steps; nil when the task has none (it is no durable
// workflow, or has completed no durable call yet), or is not found.
func loadDurableWorkflow(ctx context.Context, c *taskorch.Client, id int64, now time.Time) (*durableWorkflow, error) {
	t, err := c.Get(ctx, id)
	if errors.Is(err, taskorch.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h, err := c.History(ctx, id)
	if err != nil {
		return nil, err
	}
	maskHistory(h)
	if len(h.Steps) == 0 {
		return nil, nil
	}
	return durableSteps(t, h.Steps, now), nil
}

// durableSteps derives each step's status, what it waits for and until when from the
// checkpoints and the task's state at now.
func durableSteps(t *taskorch.Task, steps []taskorch.WorkflowStep, now time.Time) *durableWorkflow {
	d := &durableWorkflow{TaskID: t.ID, Type: t.Type, Status: t.Status, Attempt: t.Attempt}
	suspended := t.Status == taskorch.StatusPending
	for i, s := range steps {
		st := durableStep{Position: s.Position, Kind: s.Kind, Name: s.Name, Status: "completed", Attempt: s.Attempt,
			StartedAt: s.StartedAt, Result: s.Result, Until: s.WakeAt}
		done := s.CompletedAt
		st.CompletedAt = &done
		if s.StartedAt != nil {
			sec := s.CompletedAt.Sub(*s.StartedAt).Seconds()
			st.Duration = &sec
		}
		last := i == len(steps)-1
		switch s.Kind {
		case "sleep":
			st.WaitsFor = "time"
			if last && suspended && s.WakeAt != nil && s.WakeAt.After(now) {
				st.Status = "sleeping"
			}
		case "signal_wait":
			var r struct {
				Key string `json:"key"`
			}
			_ = json.Unmarshal(s.Result, &r)
			st.WaitsFor = fmt.Sprintf("signal %s key %s", strconv.Quote(s.Name), strconv.Quote(r.Key))
			if last && suspended {
				st.Status = "waiting"
			}
		case "signal":
			var r struct {
				Received bool `json:"received"`
			}
			_ = json.Unmarshal(s.Result, &r)
			st.Status = "timed_out"
			if r.Received {
				st.Status = "received"
			}
		case "await":
			var r struct {
				Tasks []struct {
					ID int64 `json:"task_id"`
				} `json:"tasks"`
			}
			_ = json.Unmarshal(s.Result, &r)
			ids := make([]int64, len(r.Tasks))
			for i, t := range r.Tasks {
				ids[i] = t.ID
			}
			st.WaitsFor = "tasks " + joinIDs(ids)
		}
		d.Steps = append(d.Steps, st)
	}
	next := steps[len(steps)-1].Position + 1
	switch t.Status {
	case taskorch.StatusWaiting:
		// An Await whose tasks have not all ended records nothing until they have: the task
		// waits for them (its parents), named in its latest event.
		d.Steps = append(d.Steps, durableStep{Position: next, Kind: "await", Name: "-", Status: "waiting",
			WaitsFor: "tasks " + joinIDs(t.ParentIDs)})
	case taskorch.StatusRunning:
		d.Steps = append(d.Steps, durableStep{Position: next, Kind: "-", Name: "-", Status: "running"})
	}
	return d
}

func joinIDs(ids []int64) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

// printDurableWorkflow prints a durable workflow's steps.
func printDurableWorkflow(w io.Writer, d *durableWorkflow) error {
	fmt.Fprintf(w, "durable workflow %d (%s): %s, attempt %d\n", d.TaskID, short(d.Type, 60), d.Status, d.Attempt)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tKIND\tNAME\tSTATUS\tATTEMPT\tDURATION\tWAITS FOR\tUNTIL\tRESULT")
	for _, s := range d.Steps {
		attempt, dur := "-", "-"
		if s.Attempt > 0 {
			attempt = strconv.Itoa(s.Attempt)
		}
		if s.Duration != nil {
			dur = (time.Duration(*s.Duration * float64(time.Second))).Round(time.Millisecond).String()
		}
		waits := s.WaitsFor
		if waits == "" {
			waits = "-"
		}
		res := "-"
		if len(s.Result) > 0 {
			res = short(string(s.Result), 60)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Position, s.Kind, short(s.Name, 40), s.Status, attempt, dur,
			short(waits, 60), ts(s.Until), res)
	}
	return tw.Flush()
}
