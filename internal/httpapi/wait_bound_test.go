package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/httpapi"
)

// A wait's timeout is cut to MaxWait: asking for a day (or 1e30 seconds) on a task that does
// not finish answers within the bound, with the task unfinished.
func TestAPIWaitIsBounded(t *testing.T) {
	t.Parallel()
	f := newAPI(t, func(c *httpapi.Config) { c.MaxWait = 500 * time.Millisecond })
	id := int64(f.call(t, f.appTok, "POST", "/v1/tasks", `{"type": "never.runs"}`).json(t)["task_id"].(float64))
	for _, timeout := range []string{"86400", "1e30"} {
		began := time.Now()
		r := f.call(t, f.appTok, "GET", fmt.Sprintf("/v1/tasks/%d/wait?timeout=%s", id, timeout), "")
		require.Equal(t, http.StatusOK, r.status, string(r.body))
		require.Equal(t, false, r.json(t)["finished"])
		require.Equal(t, "pending", r.json(t)["status"])
		// The bound is an upper limit on how long the server waits: generous for a loaded machine,
		// and far below what was asked for.
		require.Less(t, time.Since(began), time.Minute, "timeout=%s was not cut to MaxWait", timeout)
	}
}
