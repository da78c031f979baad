package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	sessionCookie = "taskorch_session"
	maxFormBytes  = 256 << 10
)

// identity is who made a request: "token", "session" or "basic:<user>"; empty when
// unauthenticated.
type identity string

// authenticate checks the request's credentials: a bearer token, basic auth or a session
// cookie. Comparisons take the same time whatever the input.
func (h *Handler) authenticate(r *http.Request) identity {
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, cred, _ := strings.Cut(auth, " ")
		switch {
		case strings.EqualFold(scheme, "Bearer") && h.cfg.Token != "":
			if equalSecret(strings.TrimSpace(cred), h.cfg.Token) {
				return "token"
			}
		case strings.EqualFold(scheme, "Basic") && h.cfg.Username != "":
			user, pass, ok := r.BasicAuth()
			if ok && equalSecret(user, h.cfg.Username) && equalSecret(pass, h.cfg.Password) {
				return identity("basic:" + h.cfg.Username)
			}
		}
	}
	if c, err := r.Cookie(sessionCookie); err == nil && h.validSession(c.Value) {
		return "session"
	}
	return ""
}

// equalSecret compares a and b in constant time (of their hashes: lengths leak nothing).
func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// sign returns the base64url HMAC-SHA256 of the parts under the secret key.
func (h *Handler) sign(parts ...string) string {
	m := hmac.New(sha256.New, h.cfg.SecretKey)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession returns a session cookie value: its expiry and a signature over it and the token,
// so that changing the token signs everyone out.
func (h *Handler) newSession(now time.Time) string {
	exp := strconv.FormatInt(now.Add(h.cfg.SessionTTL).Unix(), 10)
	return exp + "." + h.sign("session", exp, h.cfg.Token)
}

func (h *Handler) validSession(v string) bool {
	if h.cfg.Token == "" {
		return false
	}
	exp, sig, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() >= unix {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(h.sign("session", exp, h.cfg.Token)))
}

// mayView reports whether the request may see the pages.
func (h *Handler) mayView(r *http.Request) bool {
	return h.cfg.PublicRead || !h.cfg.hasCredentials() || h.authenticate(r) != ""
}

// view wraps a page: unauthenticated requests get the sign-in page (status 401), or a basic
// auth challenge when only basic auth is configured.
func (h *Handler) view(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.mayView(r) {
			h.challenge(w, r, "")
			return
		}
		next(w, r)
	}
}

// challenge answers an unauthenticated request with 401: the sign-in form when a token is
// configured (with a basic auth challenge too when basic auth is), a bare challenge otherwise.
func (h *Handler) challenge(w http.ResponseWriter, r *http.Request, msg string) {
	if h.cfg.Username != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="taskorch dashboard", charset="UTF-8"`)
	}
	if h.cfg.Token == "" || isFragment(r) || r.Method != http.MethodGet {
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	h.renderLogin(w, r, http.StatusUnauthorized, h.path(r.URL.RequestURI()), msg)
}

// action wraps a state-changing handler: refused in read-only mode (403), without
// authentication (401) or without a valid CSRF token (403).
func (h *Handler) action(next func(w http.ResponseWriter, r *http.Request, who identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.ReadOnly {
			http.Error(w, "the dashboard is read-only", http.StatusForbidden)
			return
		}
		who := h.authenticate(r)
		if who == "" {
			h.challenge(w, r, "")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "unreadable form", http.StatusBadRequest)
			return
		}
		if !h.checkCSRF(r) {
			http.Error(w, "missing or invalid CSRF token: reload the page and try again", http.StatusForbidden)
			return
		}
		next(w, r, who)
	}
}

type loginData struct {
	Next  string
	Error string
	Basic bool
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Token == "" {
		if h.mayView(r) {
			http.Redirect(w, r, h.path("/"), http.StatusSeeOther)
			return
		}
		h.challenge(w, r, "")
		return
	}
	h.renderLogin(w, r, http.StatusOK, r.URL.Query().Get("next"), "")
}

func (h *Handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	h.render(w, r, status, "login", "Sign in", "", loginData{Next: h.localPath(next), Error: msg, Basic: h.cfg.Username != ""})
}

// login signs in with the token: a session cookie (HttpOnly, SameSite=Strict).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if !h.checkCSRF(r) {
		http.Error(w, "missing or invalid CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	next := h.localPath(r.PostFormValue("next"))
	if h.cfg.Token == "" || !equalSecret(strings.TrimSpace(r.PostFormValue("token")), h.cfg.Token) {
		h.renderLogin(w, r, http.StatusUnauthorized, next, "That token is not right.")
		return
	}
	h.setCookie(w, r, sessionCookie, h.newSession(time.Now()), int(h.cfg.SessionTTL.Seconds()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session. It needs the CSRF token, so another site cannot sign anyone out.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if !h.checkCSRF(r) {
		http.Error(w, "missing or invalid CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	h.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, h.path("/login"), http.StatusSeeOther)
}

// setCookie sets one of the dashboard's cookies: HttpOnly (no script reads it),
// SameSite=Strict (no other site's request carries it), scoped to the dashboard's path, and
// Secure when the dashboard is served over HTTPS. maxAge 0 makes a session cookie, -1 deletes.
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	//nolint:gosec // Secure follows the scheme: plain HTTP on 127.0.0.1 is the default, and a Secure cookie would not be kept there
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: h.cfg.Prefix + "/", MaxAge: maxAge,
		HttpOnly: true, Secure: h.cfg.SecureCookies || r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// localPath returns p when it is a path inside the dashboard (no scheme, host or
// protocol-relative form that would redirect elsewhere), else the overview's path.
func (h *Handler) localPath(p string) string { return h.localPathOr(p, h.path("/")) }

// localPathOr is localPath with another fallback.
func (h *Handler) localPathOr(p, home string) string {
	if p == "" || !strings.HasPrefix(p, h.cfg.Prefix+"/") || strings.HasPrefix(p, "//") ||
		strings.ContainsAny(p, "\\\r\n\t") || strings.Contains(p, "/../") || strings.HasPrefix(p, h.cfg.Prefix+"//") {
		return home
	}
	return p
}
