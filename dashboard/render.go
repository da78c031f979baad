package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// fragmentHeader marks the live-refresh requests of app.js: the answer is the page's content
// block only.
const fragmentHeader = "X-Taskorch-Fragment"

func isFragment(r *http.Request) bool { return r.Header.Get(fragmentHeader) == "1" }

// templates holds one template set per page: the layout, the shared partials and the page.
type templates struct {
	pages        map[string]*template.Template
	assetVersion string // a hash of the static files, for cache busting
}

func loadTemplates() (*templates, error) {
	base, err := template.New("").Funcs(templateFuncs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	files, err := fs.Glob(templateFS, "templates/page_*.html")
	if err != nil {
		return nil, err
	}
	t := &templates{pages: map[string]*template.Template{}}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(path.Base(f), "page_"), ".html")
		clone, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if t.pages[name], err = clone.ParseFS(templateFS, f); err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", f, err)
		}
	}
	sum := sha256.New()
	err = fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		sum.Write(b)
		return err
	})
	if err != nil {
		return nil, err
	}
	t.assetVersion = hex.EncodeToString(sum.Sum(nil))[:12]
	return t, nil
}

// page is what the layout renders; Data is the page's own.
type page struct {
	Title     string
	Nav       string
	Prefix    string
	CSRF      string
	ReadOnly  bool
	Authed    bool   // the request is authenticated
	Session   bool   // signed in with a session cookie (can sign out)
	Actor     string // who the request acts as ("dashboard:<name>"), recorded with its actions
	CanAct    bool   // action buttons are shown
	HasLogin  bool   // a token is configured: there is a sign-in page
	Flash     *flash
	DB        string
	Replica   *replicaStatus // reading from Config.ReadPool: how far behind it is
	RefreshMs int64
	Asset     string
	Now       time.Time
	Data      any
}

// render writes a page with the layout, or only its content block for a live refresh.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any) {
	t := h.tpl.pages[name]
	if t == nil {
		h.fail(w, r, fmt.Errorf("no template %q", name))
		return
	}
	who := h.authenticate(r)
	p := page{
		Title: title, Nav: nav, Prefix: h.cfg.Prefix, CSRF: h.csrfToken(w, r),
		ReadOnly: h.cfg.ReadOnly, Authed: who != "", Session: who.isSession(),
		CanAct:   !h.cfg.ReadOnly && who != "",
		HasLogin: h.cfg.hasTokens(), DB: h.dbName, Asset: h.tpl.assetVersion, Replica: h.replicaLag(r.Context()),
		RefreshMs: h.cfg.RefreshInterval.Milliseconds(), Now: time.Now(), Data: data,
	}
	if who != "" {
		p.Actor = who.actor()
	}
	fragment := isFragment(r)
	if !fragment {
		p.Flash = h.takeFlash(w, r)
	}
	var buf bytes.Buffer
	tmpl := "layout"
	if fragment {
		tmpl = "content"
	}
	var err error
	if fragment { // a live refresh: the replica's lag is refreshed with the content
		err = t.ExecuteTemplate(&buf, "replica", p)
	}
	if err == nil {
		err = t.ExecuteTemplate(&buf, tmpl, p)
	}
	if err != nil {
		h.cfg.Logger.Error("dashboard: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Vary", fragmentHeader+", Cookie, Authorization")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorData is the error page's.
type errorData struct {
	Status  int
	Message string
}

// fail shows an error page: not found, bad input, or a database error (its message, with any
// password in it masked). Unexpected errors are logged.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	msg := err.Error()
	var ue userError
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &ue):
		status, msg = ue.status, ue.msg
	case errors.As(err, &pgErr) && pgErr.Code == "57014":
		status, msg = http.StatusServiceUnavailable, "the query took longer than the dashboard's timeout ("+h.cfg.QueryTimeout.String()+"); narrow the filter"
	default:
		h.cfg.Logger.Error("dashboard: request failed", "path", r.URL.Path, "error", redactText(msg))
		msg = "database error: " + msg
	}
	h.render(w, r, status, "error", http.StatusText(status), "", errorData{Status: status, Message: redactText(msg)})
}

// userError is an error shown as is, with an HTTP status.
type userError struct {
	status int
	msg    string
}

func (e userError) Error() string { return e.msg }

func notFoundf(format string, args ...any) error {
	return userError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

func badRequestf(format string, args ...any) error {
	return userError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	if !h.mayView(r) {
		h.challenge(w, r, "")
		return
	}
	h.fail(w, r, notFoundf("no page at %s", h.path(r.URL.Path)))
}

// static serves the embedded assets. Their URLs carry the asset version, so they may be
// cached for long.
func (h *Handler) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(b)
}

// flash is a one-time message shown after an action's redirect, carried by a signed cookie.
type flash struct {
	Kind string `json:"k"` // ok or error
	Msg  string `json:"m"`
}

const flashCookie = "taskorch_flash"

func (h *Handler) setFlash(w http.ResponseWriter, r *http.Request, kind, msg string) {
	if len(msg) > 1500 {
		msg = msg[:1500] + "…"
	}
	b, _ := json.Marshal(flash{Kind: kind, Msg: msg})
	v := base64.RawURLEncoding.EncodeToString(b)
	h.setCookie(w, r, flashCookie, v+"."+h.sign("flash", v), 60)
}

func (h *Handler) takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	h.setCookie(w, r, flashCookie, "", -1)
	v, sig, ok := strings.Cut(c.Value, ".")
	if !ok || sig != h.sign("flash", v) {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil
	}
	var f flash
	if json.Unmarshal(b, &f) != nil {
		return nil
	}
	return &f
}
