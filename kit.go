package taskorch

import (
	"fmt"

	"github.com/taskorch/taskorch/internal/kit"
	"github.com/taskorch/taskorch/internal/worker"
)

// Package taskorchtest runs a task through the worker's path without a worker (taskorchtest.Work);
// internal/kit hands it the worker configuration NewWorker would make.
func init() { kit.WorkerConfig = kitWorkerConfig }

// kitWorkerConfig is NewWorker's configuration of v, a *WorkerConfig (nil: the defaults).
func kitWorkerConfig(v any) (worker.Config, error) {
	p, ok := v.(*WorkerConfig)
	if !ok {
		return worker.Config{}, fmt.Errorf("taskorch: want a *WorkerConfig, got %T", v)
	}
	c := WorkerConfig{}
	if p != nil {
		c = *p
	}
	c, err := c.withDefaults()
	if err != nil {
		return worker.Config{}, err
	}
	return c.workerConfig(), nil
}
