package bench

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/humanize"
	"github.com/taskorch/taskorch/internal/push"
)

// PushConfig configures Push.
type PushConfig struct {
	WorkerOptions // Concurrency defaults to 200.

	// Tasks is how many no-op tasks each run works. Defaults to 20,000.
	Tasks int
}

// PushResult is Push's result.
type PushResult struct {
	Header
	// Endpoint is the URL the tasks were pushed to: an HTTP server in this process.
	Endpoint string `json:"endpoint"`
	// Baseline is `bench throughput` with as many no-op tasks run by a Go handler.
	Baseline ThroughputRun `json:"baseline"`
	// Push is the same tasks pushed to the endpoint (docs/worker.md, "Push workers").
	Push ThroughputRun `json:"push"`
	// BaselineTasksPerSecond, PushTasksPerSecond and Ratio (push ÷ baseline) repeat the two
	// figures.
	BaselineTasksPerSecond float64 `json:"baseline_tasks_per_second"`
	PushTasksPerSecond     float64 `json:"push_tasks_per_second"`
	Ratio                  float64 `json:"ratio"`
}

// Table implements Result.
func (r *PushResult) Table() []Row {
	return append(r.headerRows(),
		Row{"tasks", fmt.Sprintf("%s no-op per run (bulk-enqueued, then worked)", humanize.Thousands(r.Push.Tasks))},
		Row{"workers", fmt.Sprintf("%d in-process, concurrency %d each, fetch batch %s", r.Push.Workers, r.Push.Concurrency, fetchBatchText(r.Push.FetchBatch))},
		Row{"endpoint", r.Endpoint + " (in this process: checks the signature, answers 204)"},
		Row{"throughput (Go handler)", fmt.Sprintf("%s tasks/s in %.3f s, %s", humanize.Thousands(int64(r.BaselineTasksPerSecond)), r.Baseline.Seconds, r.Baseline.CPU)},
		Row{"throughput (pushed)", fmt.Sprintf("%s tasks/s in %.3f s, %s", humanize.Thousands(int64(r.PushTasksPerSecond)), r.Push.Seconds, r.Push.CPU)},
		Row{"ratio", fmt.Sprintf("%.2f of the Go handler's", r.Ratio)},
	)
}

// pushEndpoint is the benchmark's endpoint: it checks each request's signature (as a real one
// would: the cost is part of a push) and answers 204, counting the tasks.
func pushEndpoint(key []byte, c *atomic.Pointer[counter]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(r.Header.Get(push.HeaderID) + "." + r.Header.Get(push.HeaderTimestamp) + "."))
		mac.Write(body)
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if !strings.Contains(" "+r.Header.Get(push.HeaderSignature)+" ", " "+want+" ") {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		c.Load().add()
		w.WriteHeader(http.StatusNoContent)
	})
}

// Push measures no-op tasks pushed to an HTTP endpoint on the same machine against the same
// number run by a Go handler, in the same run: first `bench throughput` with Tasks no-op tasks,
// then Tasks more delivered by the push handler (internal/push) to an endpoint served by this
// process on 127.0.0.1, each bulk-enqueued and then worked by the same in-process workers.
func Push(ctx context.Context, e *Env, cfg PushConfig) (*PushResult, error) {
	if cfg.Tasks <= 0 {
		cfg.Tasks = 20_000
	}
	tc, err := ThroughputConfig{WorkerOptions: cfg.WorkerOptions, Tasks: cfg.Tasks}.withDefaults()
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	var current atomic.Pointer[counter]
	srv := httptest.NewServer(pushEndpoint(key, &current))
	defer srv.Close()
	r := &PushResult{Header: e.header("push"), Endpoint: srv.URL + "/push"}
	if r.Baseline, err = e.runBulk(ctx, tc); err != nil {
		return nil, err
	}
	targets, err := push.ParseTargets([]string{noopType + "=" + r.Endpoint}, "bench push")
	if err != nil {
		return nil, err
	}
	pc := tc
	pc.handlers = func(c *counter) (*taskorch.Handlers, error) {
		current.Store(c) // before the workers start
		hs := taskorch.NewHandlers()
		err := push.Register(hs, push.Config{Targets: targets, Keys: [][]byte{key}, Timeout: 30 * time.Second,
			MaxConnsPerHost: tc.Concurrency * tc.Workers, UserAgent: "taskorch-bench"})
		return hs, err
	}
	if r.Push, err = e.runBulk(ctx, pc); err != nil {
		return nil, err
	}
	r.BaselineTasksPerSecond, r.PushTasksPerSecond = r.Baseline.TasksPerSecond, r.Push.TasksPerSecond
	if r.BaselineTasksPerSecond > 0 {
		r.Ratio = r.PushTasksPerSecond / r.BaselineTasksPerSecond
	}
	r.finish()
	return r, nil
}
