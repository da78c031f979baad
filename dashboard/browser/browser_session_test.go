package browser_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// sessionCookie returns chromium's session cookie for base, or nil.
func (b *browser) sessionCookie(base string) *network.Cookie {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
	require.NoError(b.t, err)
	for _, c := range res.Cookies {
		if c.Name == "taskorch_session" {
			return c
		}
	}
	return nil
}

// In chromium: sign in, keep a copy of the session cookie, press "sign out", put the copy
// back (as whoever kept it would) and open a page: the sign-in form, not the page.
func TestBrowserSignOutRevokesASavedCookie(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	_, err := pool.Exec(t.Context(), `select queues.enqueue('revoke.browser', '{}')`)
	require.NoError(t, err)
	base := browserDashboard(t, pool)
	b := newBrowser(t)
	b.signIn(base)
	b.do(chromedp.Navigate(base+"/tasks"), chromedp.WaitVisible(chromedp.CSS(`tr[data-task-id]`)))
	require.Contains(t, b.text("#content"), "revoke.browser")
	saved := b.sessionCookie(base)
	require.NotNil(t, saved, "signed in: a session cookie")
	require.True(t, saved.HTTPOnly)

	b.do(click(`form[action$="/logout"] button`), chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) input[name=token]`)))
	require.Nil(t, b.sessionCookie(base), "the browser forgot the cookie")

	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	httpOnly := true
	_, err = chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{
		Name: saved.Name, Value: saved.Value, URL: base + "/", Path: saved.Path, HTTPOnly: &httpOnly, SameSite: saved.SameSite,
	})
	require.NoError(t, err)
	require.Equal(t, saved.Value, b.sessionCookie(base).Value, "the saved copy is back in the browser")
	b.do(chromedp.Navigate(base+"/tasks"), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)))
	require.NotContains(t, eval[string](b, `document.body.innerText`), "revoke.browser")
	b.screenshot("signed_out_cookie_replayed")
}
