package dashboard

import (
	"net/http"
	"strings"

	"github.com/taskorch/taskorch/internal/httpapi"
)

// mountAPI serves the HTTP API (docs/api.md) under /api, behind the dashboard's bearer tokens:
// a request with Config.Token or one of Config.Tokens acts as the role the dashboard's pool
// logs in as, the dashboard's own (SET LOCAL ROLE to it). Session cookies and basic auth are
// not taken there: a browser sends them by itself, and the API has no CSRF check. ReadOnly
// makes the API read-only too. A pool user that is not a plain role name leaves the API off.
func (h *Handler) mountAPI(m *http.ServeMux) {
	role := h.pool.Config().ConnConfig.User
	api, err := httpapi.New(h.pool, httpapi.Config{
		Authenticate: func(r *http.Request) (string, bool) {
			scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || !h.cfg.hasTokens() {
				return "", false
			}
			if _, ok := h.tokenName(strings.TrimSpace(cred)); !ok {
				return "", false
			}
			return role, true
		},
		Roles:    []string{role},
		Prefix:   "/api",
		ReadOnly: h.cfg.ReadOnly,
		Logger:   h.cfg.Logger.With("component", "api"),
	})
	if err != nil {
		h.cfg.Logger.Warn("the HTTP API is off on this dashboard", "error", err.Error())
		return
	}
	h.api = api
	m.Handle("/api/", api)
}

// Close ends the HTTP API's waits in progress and releases the connection they listen on
// (docs/api.md). Call it before closing the pool; the handler serves no API wait after it.
func (h *Handler) Close() {
	if h.api != nil {
		h.api.Close()
	}
}
