package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	sessionCookie = "taskorch_session"
	maxFormBytes  = 256 << 10
)

// identity is who made a request: "token:<name>" (a bearer token, by its name in
// Config.Tokens, "token" for Config.Token), "session:<name>" (signed in with that token) or
// "basic:<user>"; empty when unauthenticated.
type identity string

// actor is who the identity acts as, recorded with its actions: "dashboard:<name>".
func (who identity) actor() string {
	_, name, _ := strings.Cut(string(who), ":")
	return "dashboard:" + name
}

// isSession reports whether the request came with a session cookie (it can sign out).
func (who identity) isSession() bool { return strings.HasPrefix(string(who), "session:") }

// tokenName returns the name of the token tok is, comparing it with every token in constant
// time; ok is false when it is none of them.
func (h *Handler) tokenName(tok string) (name string, ok bool) {
	if h.cfg.Token != "" && equalSecret(tok, h.cfg.Token) {
		name, ok = defaultTokenName, true
	}
	for n, t := range h.cfg.Tokens {
		if equalSecret(tok, t) && !ok {
			name, ok = n, true
		}
	}
	return name, ok
}

// tokenOf returns the token of a name.
func (h *Handler) tokenOf(name string) (string, bool) {
	if name == defaultTokenName && h.cfg.Token != "" {
		return h.cfg.Token, true
	}
	t, ok := h.cfg.Tokens[name]
	return t, ok
}

// whoKey keys a request's identity in its context: a session is checked against the database
// once per request.
type whoKey struct{}

type whoResult struct {
	who identity
	err error
}

// authenticate checks the request's credentials: a bearer token, basic auth or a session
// cookie. Comparisons take the same time whatever the input. A session cookie that could not be
// checked (the database did not answer) counts as no credentials; identify says why.
func (h *Handler) authenticate(r *http.Request) identity {
	who, _ := h.identify(r)
	return who
}

// identify is authenticate with the error of a session check that failed.
func (h *Handler) identify(r *http.Request) (identity, error) {
	if v, ok := r.Context().Value(whoKey{}).(whoResult); ok {
		return v.who, v.err
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, cred, _ := strings.Cut(auth, " ")
		switch {
		case strings.EqualFold(scheme, "Bearer") && h.cfg.hasTokens():
			if name, ok := h.tokenName(strings.TrimSpace(cred)); ok {
				return identity("token:" + name), nil
			}
		case strings.EqualFold(scheme, "Basic") && h.cfg.Username != "":
			user, pass, ok := r.BasicAuth()
			if ok && equalSecret(user, h.cfg.Username) && equalSecret(pass, h.cfg.Password) {
				return identity("basic:" + h.cfg.Username), nil
			}
		}
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if s, ok := h.parseSession(c.Value); ok {
			revoked, err := h.sessionRevoked(r.Context(), s.id)
			if err != nil {
				return "", err
			}
			if !revoked {
				return identity("session:" + s.name), nil
			}
		}
	}
	return "", nil
}

// withIdentity returns r carrying its identity (see identify), for the handlers after it.
func (h *Handler) withIdentity(r *http.Request) (*http.Request, identity, error) {
	who, err := h.identify(r)
	if e, ok := r.Context().Value(accessKey{}).(*accessEntry); ok && err == nil && who != "" {
		e.who = who
	}
	return r.WithContext(context.WithValue(r.Context(), whoKey{}, whoResult{who: who, err: err})), who, err
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

// session is a parsed, correctly signed, unexpired session cookie.
type session struct {
	id      string
	name    string // the name of the token it was signed in with
	expires time.Time
}

// newSession returns a session cookie value for the holder of token name: a random id, its
// expiry, the name and a signature over them and the name's token, so that changing a token
// signs its holder out. Signing out records the id in the database
// (queues.revoke_dashboard_session), where every dashboard process sharing the secret key looks
// before it accepts the cookie.
func (h *Handler) newSession(now time.Time, name string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	id := base64.RawURLEncoding.EncodeToString(b)
	exp := strconv.FormatInt(now.Add(h.cfg.SessionTTL).Unix(), 10)
	tok, _ := h.tokenOf(name)
	return id + "." + exp + "." + base64.RawURLEncoding.EncodeToString([]byte(name)) + "." + h.sign("session", id, exp, name, tok)
}

// parseSession checks a session cookie's signature and expiry, not whether it was revoked.
func (h *Handler) parseSession(v string) (session, bool) {
	if !h.cfg.hasTokens() {
		return session{}, false
	}
	parts := strings.Split(v, ".")
	if len(parts) != 4 {
		return session{}, false
	}
	id, exp, rawName, sig := parts[0], parts[1], parts[2], parts[3]
	if len(id) < 16 || len(id) > 128 {
		return session{}, false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() >= unix {
		return session{}, false
	}
	name, err := base64.RawURLEncoding.DecodeString(rawName)
	if err != nil {
		return session{}, false
	}
	tok, ok := h.tokenOf(string(name))
	if !ok || !hmac.Equal([]byte(sig), []byte(h.sign("session", id, exp, string(name), tok))) {
		return session{}, false
	}
	return session{id: id, name: string(name), expires: time.Unix(unix, 0)}, true
}

// sessionRevoked asks the primary (a replica might not have seen a sign-out yet) whether the
// session was signed out.
func (h *Handler) sessionRevoked(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.QueryTimeout)
	defer cancel()
	var revoked bool
	if err := h.pool.QueryRow(ctx, `select queues.dashboard_session_revoked($1)`, id).Scan(&revoked); err != nil {
		return false, fmt.Errorf("check the session (the dashboard's role needs execute on queues.dashboard_session_revoked(text)): %w", err)
	}
	return revoked, nil
}

// revokeSession signs a session out for every dashboard process.
func (h *Handler) revokeSession(ctx context.Context, s session) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.QueryTimeout)
	defer cancel()
	if _, err := h.pool.Exec(ctx, `select queues.revoke_dashboard_session($1, $2)`, s.id, s.expires); err != nil {
		return fmt.Errorf("sign out (the dashboard's role needs execute on queues.revoke_dashboard_session(text, timestamptz)): %w", err)
	}
	return nil
}

// mayView reports whether the request may see the pages.
func (h *Handler) mayView(r *http.Request) bool {
	return h.cfg.PublicRead || !h.cfg.hasCredentials() || h.authenticate(r) != ""
}

// view wraps a page: unauthenticated requests get the sign-in page (status 401), or a basic
// auth challenge when only basic auth is configured. A session cookie that could not be
// checked gets an error page (503) saying why.
func (h *Handler) view(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r, who, err := h.withIdentity(r)
		if err != nil {
			h.sessionUnchecked(w, r, err)
			return
		}
		if !h.cfg.PublicRead && h.cfg.hasCredentials() && who == "" {
			h.challenge(w, r, "")
			return
		}
		next(w, r)
	}
}

// sessionUnchecked answers a request whose session cookie could not be checked: 503, with the
// reason logged and shown (passwords masked).
func (h *Handler) sessionUnchecked(w http.ResponseWriter, r *http.Request, err error) {
	h.cfg.Logger.Error("dashboard: could not check a session", "path", r.URL.Path, "error", redactText(err.Error()))
	http.Error(w, "the session could not be checked: "+redactText(err.Error()), http.StatusServiceUnavailable)
}

// challenge answers an unauthenticated request with 401: the sign-in form when a token is
// configured (with a basic auth challenge too when basic auth is), a bare challenge otherwise.
func (h *Handler) challenge(w http.ResponseWriter, r *http.Request, msg string) {
	if h.cfg.Username != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="taskorch dashboard", charset="UTF-8"`)
	}
	if !h.cfg.hasTokens() || isFragment(r) || r.Method != http.MethodGet {
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
		r, who, err := h.withIdentity(r)
		if err != nil {
			h.sessionUnchecked(w, r, err)
			return
		}
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
	if !h.cfg.hasTokens() {
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
	name, ok := h.tokenName(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		h.renderLogin(w, r, http.StatusUnauthorized, next, "That token is not right.")
		return
	}
	h.setCookie(w, r, sessionCookie, h.newSession(time.Now(), name), int(h.cfg.SessionTTL.Seconds()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session: its id is recorded as revoked in the database, so the cookie is
// refused by every dashboard process from now on, even if a copy of it was kept; then the
// browser's cookie is deleted. It needs the CSRF token, so another site cannot sign anyone out.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if !h.checkCSRF(r) {
		http.Error(w, "missing or invalid CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	h.setCookie(w, r, sessionCookie, "", -1)
	if c, err := r.Cookie(sessionCookie); err == nil {
		if s, ok := h.parseSession(c.Value); ok {
			if err := h.revokeSession(r.Context(), s); err != nil {
				// The browser forgets the cookie, but a copy of it would still work: say so.
				h.cfg.Logger.Error("dashboard: could not revoke a session", "error", redactText(err.Error()))
				http.Error(w, "signed out in this browser, but the session could not be revoked on the server, "+
					"so a copy of its cookie would still work until it expires: "+redactText(err.Error()), http.StatusServiceUnavailable)
				return
			}
		}
	}
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
