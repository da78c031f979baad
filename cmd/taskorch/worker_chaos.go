package main

import (
	"os"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/cmd/taskorch/internal/chaos/durableflow"
)

// registerChaosWorkflows registers the chaos harness's durable Go workflow (chaos.durable) when
// TASKORCH_CHAOS_WORKFLOWS is true: the harness sets it on the workers it starts
// (docs/testing.md, "Chaos"); it is no setting for a deployment, and a worker without it has no
// such task type. A value that is not a boolean is a usage error.
func registerChaosWorkflows(hs *taskorch.Handlers, pool *pgxpool.Pool) error {
	v := os.Getenv(durableflow.EnvVar)
	if v == "" {
		return nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return usageErrorf("%s=%q is not a boolean (true or false)", durableflow.EnvVar, v)
	}
	if on {
		durableflow.Register(hs, pool)
	}
	return nil
}
