package dashboard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// apiCall sends a request to the dashboard's HTTP API and returns its status and body.
func apiCall(t *testing.T, c *http.Client, method, u, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The dashboard serves the HTTP API (docs/api.md) under Prefix + /api, behind its bearer
// tokens, acting as the dashboard's own database role: a named token enqueues, lists, reads
// and cancels; no token, a wrong one, basic auth and the session cookie of a signed-in browser
// are refused (401: the API has no CSRF check, so what a browser sends by itself is not taken);
// a read-only dashboard's API refuses writes.
func TestDashboardServesTheAPI(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	s := seed(t, pool)
	const annToken = "ann-token-0123456789abcdef"
	h, err := dashboard.New(pool, dashboard.Config{Prefix: "/ops", Token: testToken, Tokens: map[string]string{"ann": annToken},
		Username: "admin", Password: "admin-password-123"})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	srv := newServer(t, h)
	c := browserlessClient(t)
	base := srv.URL + "/ops/api/v1"
	ann := []string{"Authorization", "Bearer " + annToken}

	code, body := apiCall(t, c, "POST", base+"/tasks", `{"type": "dash.api", "payload": {"n": 1}}`, ann...)
	require.Equal(t, http.StatusCreated, code, body)
	var created struct {
		TaskID int64 `json:"task_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	var enqueuedBy, user string
	require.NoError(t, pool.QueryRow(t.Context(), `select enqueued_by, current_user from queues.task where task_id = $1`, created.TaskID).Scan(&enqueuedBy, &user))
	require.Equal(t, user, enqueuedBy, "the API acts as the dashboard's own role")

	code, body = apiCall(t, c, "GET", base+"/tasks?status=dead", "", bearer()...)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"task_id":`+itoa(s.dead))
	code, body = apiCall(t, c, "POST", base+"/tasks/"+itoa(created.TaskID)+"/cancel", "", ann...)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"status":"cancelled"`)

	cookie := signInOver(t, c, srv.URL+"/ops")
	for name, hdr := range map[string][]string{
		"none":    nil,
		"wrong":   {"Authorization", "Bearer not-a-dashboard-token-at-all"},
		"basic":   {"Authorization", "Basic YWRtaW46YWRtaW4tcGFzc3dvcmQtMTIz"}, // admin:admin-password-123
		"session": withCookie(cookie),
	} {
		code, body := apiCall(t, &http.Client{}, "POST", base+"/tasks", `{"type": "dash.refused"}`, hdr...)
		require.Equal(t, http.StatusUnauthorized, code, name+": "+body)
		require.Contains(t, body, `"code":"unauthorized"`, name)
		require.NotContains(t, body, testToken, name)
	}
	var refused int
	require.NoError(t, pool.QueryRow(t.Context(), `select count(*) from queues.task where task_type = 'dash.refused'`).Scan(&refused))
	require.Zero(t, refused)

	ro, err := dashboard.New(pool, dashboard.Config{Token: testToken, ReadOnly: true})
	require.NoError(t, err)
	t.Cleanup(ro.Close)
	roSrv := newServer(t, ro)
	code, _ = apiCall(t, c, "POST", roSrv.URL+"/api/v1/tasks", `{"type": "dash.refused"}`, bearer()...)
	require.Equal(t, http.StatusForbidden, code)
	code, _ = apiCall(t, c, "GET", roSrv.URL+"/api/v1/tasks/"+itoa(s.dead), "", bearer()...)
	require.Equal(t, http.StatusOK, code)
}
