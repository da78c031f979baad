package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
)

// CSRF protection is a signed double-submit: a random value in an HttpOnly, SameSite=Strict
// cookie, and in every form its HMAC under the secret key. A POST must carry both, matching;
// another site can neither read the cookie nor compute the signature, and a SameSite=Strict
// cookie is not even sent with its requests. Requests a browser marks as cross-site
// (Sec-Fetch-Site) or from another origin (Origin) are refused outright.
const (
	csrfCookie = "taskorch_csrf"
	csrfField  = "csrf_token"
	csrfHeader = "X-CSRF-Token"
)

// csrfToken returns the token for the forms of the page being rendered, setting the cookie it
// is bound to when the request has none. Call it before writing the response.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return h.sign("csrf", c.Value)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	v := base64.RawURLEncoding.EncodeToString(b)
	h.setCookie(w, r, csrfCookie, v, 0)
	// Later reads in this request (the same page) see the new cookie.
	r.AddCookie(&http.Cookie{Name: csrfCookie, Value: v}) //nolint:gosec // a request's cookie: the attributes do not apply
	return h.sign("csrf", v)
}

// checkCSRF reports whether a state-changing request carries a valid token (form field
// csrf_token or header X-CSRF-Token) bound to its cookie, and comes from this origin.
func (h *Handler) checkCSRF(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		// Behind a proxy that rewrites Host, the browser's host is in X-Forwarded-Host (a header
		// a page of another site cannot set).
		u, err := url.Parse(o)
		if err != nil || (u.Host != r.Host && u.Host != r.Header.Get("X-Forwarded-Host")) {
			return false
		}
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) < 32 {
		return false
	}
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue(csrfField)
	}
	return got != "" && hmac.Equal([]byte(got), []byte(h.sign("csrf", c.Value)))
}
