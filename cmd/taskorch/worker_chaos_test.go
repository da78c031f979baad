package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A TASKORCH_CHAOS_WORKFLOWS that is not a boolean stops the worker with a usage error (exit 2)
// naming it, before it connects to anything.
func TestWorkerChaosWorkflowsBadValue(t *testing.T) {
	t.Parallel()
	r := runBinary(t, []string{"TASKORCH_CHAOS_WORKFLOWS=maybe", "DATABASE_URL=postgres://nobody@127.0.0.1:1/none"}, "worker")
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, `TASKORCH_CHAOS_WORKFLOWS="maybe" is not a boolean (true or false)`)
}
