package main

import (
	"os"
	"strconv"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/chaosflow"
)

// chaosWorkflowsEnabled reports whether TASKORCH_CHAOS_WORKFLOWS is true: the worker then
// registers the chaos harness's durable Go workflow, chaos.durable (internal/chaosflow). The
// harness sets it on the workers it starts (docs/testing.md, "Chaos"); it is no setting for a
// deployment, and a worker without it has no such task type. A value that is not a boolean is a
// usage error, before the worker connects.
func chaosWorkflowsEnabled() (bool, error) {
	v := os.Getenv(chaosflow.EnvVar)
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, usageErrorf("%s=%q is not a boolean (true or false)", chaosflow.EnvVar, v)
	}
	return on, nil
}
