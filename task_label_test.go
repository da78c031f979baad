package taskorch_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
)

// A db_function task is labelled with the function it runs; other tasks, and db_function
// payloads without a function name, with their type only.
func TestTaskLabel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		typ, payload, fn, label string
	}{
		{"db_function", `{"db_function": "comms.send_email_supervisor", "send_email_task_id": 1}`, "comms.send_email_supervisor", "db_function comms.send_email_supervisor"},
		{"db_function", `{"send_email_task_id": 1}`, "", "db_function"},
		{"db_function", `{"db_function": 7}`, "", "db_function"},
		{"db_function", `not json`, "", "db_function"},
		{"email", `{"db_function": "x.y"}`, "", "email"},
		{"db_function", `{"db_function": "` + strings.Repeat("a", 300) + `"}`, strings.Repeat("a", 100), ""},
	} {
		task := &taskorch.Task{Type: c.typ, Payload: json.RawMessage(c.payload)}
		if c.label == "" {
			require.True(t, strings.HasPrefix(task.Function(), c.fn), "a long name is cut")
			require.LessOrEqual(t, len(task.Function()), 130)
			continue
		}
		require.Equal(t, c.fn, task.Function(), c.payload)
		require.Equal(t, c.label, task.Label(), c.payload)
	}
}
