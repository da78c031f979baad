package main

import (
	"bytes"
	"encoding/json"

	"github.com/taskorch/taskorch"
	mask "github.com/taskorch/taskorch/internal/redact"
)

// The task commands print what the dashboard shows, masked the same way (internal/redact,
// docs/security.md): a payload's or a result's secrets, and URL passwords and key=value secrets
// in error messages, in the tables and in --json alike. The database keeps every value.

// maskTask masks the secrets of a task about to be printed.
func maskTask(t *taskorch.Task) {
	if t == nil {
		return
	}
	t.Payload = mask.JSON(t.Payload)
	t.Result = mask.JSON(t.Result)
	t.LastError = maskText(t.LastError)
}

// maskHistory masks the secrets of a task's events, errors and workflow steps' results.
func maskHistory(h *taskorch.History) {
	if h == nil {
		return
	}
	for i := range h.Events {
		h.Events[i].Detail = maskText(h.Events[i].Detail)
	}
	for i := range h.Errors {
		e := &h.Errors[i]
		e.Message = mask.String(e.Message)
		e.Context = maskObject(e.Context)
	}
	for i := range h.Steps {
		h.Steps[i].Result = mask.JSON(h.Steps[i].Result) // a step's result is like a task's
	}
}

func maskText(s *string) *string {
	if s == nil {
		return nil
	}
	m := mask.String(*s)
	return &m
}

// maskObject masks a decoded JSON object (an error's context).
func maskObject(o map[string]any) map[string]any {
	if o == nil {
		return nil
	}
	raw, err := json.Marshal(o)
	if err != nil {
		return map[string]any{"unprintable": mask.Mask}
	}
	masked := mask.JSON(raw)
	if bytes.Equal(masked, raw) {
		return o
	}
	out := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(masked))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return map[string]any{"unprintable": mask.Mask}
	}
	return out
}
