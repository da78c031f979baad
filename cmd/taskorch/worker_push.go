package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/builtinhandlers"
	"github.com/taskorch/taskorch/internal/push"
)

// The push workers' variables (docs/configuration.md, "Push workers").
const (
	envHTTPTargets = "TASKORCH_HTTP_TARGETS"
	envHTTPSecrets = "TASKORCH_HTTP_TARGET_SECRETS" //nolint:gosec // the variable's name, not a credential
)

// pushSetup is the push workers' configuration, checked before the worker connects.
type pushSetup struct {
	targets []push.Target
	keys    [][]byte
}

// pushTargets reads --http-target (or TASKORCH_HTTP_TARGETS), TASKORCH_HTTP_TARGET_SECRETS and
// --http-timeout; nil without targets. A bad one is a usage error naming the setting.
func (f *workerFlags) pushTargets() (*pushSetup, error) {
	specs, setting := f.httpTargets, "--http-target"
	if len(specs) == 0 {
		specs, setting = strings.Split(os.Getenv(envHTTPTargets), ","), envHTTPTargets
	}
	targets, err := push.ParseTargets(specs, setting)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	if len(targets) == 0 {
		return nil, nil
	}
	if f.httpTimeout <= 0 {
		return nil, usageErrorf("--http-timeout (TASKORCH_HTTP_TIMEOUT) must be positive, got %s", f.httpTimeout)
	}
	keys, err := push.ParseSecrets(os.Getenv(envHTTPSecrets), envHTTPSecrets)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	// A type the worker runs itself (taskorch.noop, ...) is refused here, before connecting.
	builtin := taskorch.NewHandlers()
	builtinhandlers.Register(builtin)
	if err := push.Register(builtin, push.Config{Targets: targets, Keys: keys, Timeout: f.httpTimeout}); err != nil {
		return nil, usageErrorf("%s: %v", setting, err)
	}
	return &pushSetup{targets: targets, keys: keys}, nil
}

// registerPush registers the push handlers in hs (nothing without targets).
func registerPush(hs *taskorch.Handlers, pool *pgxpool.Pool, s *pushSetup, f *workerFlags, log *slog.Logger) error {
	if s == nil {
		return nil
	}
	c, err := taskorch.NewClient(pool, nil)
	if err != nil {
		return err
	}
	err = push.Register(hs, push.Config{
		Targets:         s.targets,
		Keys:            s.keys,
		Timeout:         f.httpTimeout,
		ParentResults:   c.ParentResults,
		MaxConnsPerHost: f.concurrency,
		UserAgent:       "taskorch/" + currentBuild().Version,
	})
	if err != nil {
		return usageErrorf("--http-target: %v", err)
	}
	for _, t := range s.targets {
		log.Info("pushing tasks to an HTTP endpoint", "task_type", t.Type, "url", t.Redacted(), "timeout", f.httpTimeout)
		if t.Insecure() {
			log.Warn("push target over plain http to another host: tasks and results cross the network unencrypted (use https)",
				"task_type", t.Type, "url", t.Redacted())
		}
	}
	return nil
}
