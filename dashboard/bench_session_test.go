package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/dashboard"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// BenchmarkSessionCheck measures what checking a session against the database (has it been
// signed out?) adds to a page: the schedules page of an empty database (a page as cheap as they
// come) with the bearer token, which needs no check, and with a session cookie. ServeHTTP into a
// recorder, no network.
//
//	go run ./internal/cmd/withpg -- go test -run '^$' -bench SessionCheck -count 5 ./dashboard/
func BenchmarkSessionCheck(b *testing.B) {
	pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 4})
	h, err := dashboard.New(pool, dashboard.Config{Token: testToken})
	require.NoError(b, err)
	session := benchSignIn(b, h)
	for _, bc := range []struct {
		name, header, value string
	}{{"bearer", "Authorization", "Bearer " + testToken}, {"session", "Cookie", "taskorch_session=" + session}} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/schedules", nil)
			req.Header.Set(bc.header, bc.value)
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}

// benchSignIn signs in on h with the token and returns the session cookie's value.
func benchSignIn(b *testing.B, h http.Handler) string {
	b.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/login", nil))
	m := csrfInput.FindStringSubmatch(rec.Body.String())
	require.NotNil(b, m)
	var csrf string
	for _, c := range rec.Result().Cookies() {
		if c.Name == "taskorch_csrf" {
			csrf = c.Value
		}
	}
	form := url.Values{"csrf_token": {m[1]}, "token": {testToken}}
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cookie", "taskorch_csrf="+csrf)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(b, http.StatusSeeOther, rec.Code, rec.Body.String())
	for _, c := range rec.Result().Cookies() {
		if c.Name == "taskorch_session" {
			return c.Value
		}
	}
	require.FailNow(b, "no session cookie")
	return ""
}
