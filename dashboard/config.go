package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5/pgxpool"
	"log/slog"
	"strings"
	"time"
)

// Config configures the dashboard. Give it credentials (Token, or Username and Password) or
// set ReadOnly: New refuses a dashboard that anyone could act on.
type Config struct {
	// Prefix is the path the dashboard is mounted at, without a trailing slash, e.g.
	// "/taskorch": mount the handler at Prefix+"/" (it strips Prefix itself; do not wrap it in
	// http.StripPrefix). Defaults to "" (the root).
	Prefix string

	// Token authenticates a request as "Authorization: Bearer <token>", or through a session
	// cookie made by signing in with it on the /login page. Use a long random value
	// (NewToken makes one). Defaults to none.
	Token string

	// Username and Password, when both set, authenticate with HTTP basic auth. Defaults to none.
	Username string
	Password string

	// ReadOnly refuses every action (retry, cancel, pause, resume) and hides their buttons.
	// Without credentials, its pages are open to anyone who can reach the address. Defaults
	// to false.
	ReadOnly bool

	// PublicRead lets unauthenticated requests view the pages; actions still need
	// authentication. Defaults to false: every page needs authentication when credentials are
	// configured.
	PublicRead bool

	// SecureCookies marks the session and CSRF cookies Secure (sent over HTTPS only). Set it
	// when the dashboard is served over HTTPS behind a proxy that terminates TLS; a request
	// with TLS gets Secure cookies anyway. Defaults to false.
	SecureCookies bool

	// SessionTTL is how long a sign-in with the token lasts. Defaults to 12 hours.
	SessionTTL time.Duration

	// RefreshInterval is how often an open page refreshes its content. Defaults to 5s;
	// negative turns live refresh off.
	RefreshInterval time.Duration

	// QueryTimeout bounds each page's database work. Defaults to 10s.
	QueryTimeout time.Duration

	// SecretKey signs session and CSRF cookies. Defaults to 32 random bytes, made by New: a
	// restart then signs everyone out. Give several replicas behind one address the same key.
	SecretKey []byte

	// Logger receives errors the dashboard could not show on a page. Defaults to
	// slog.Default().
	Logger *slog.Logger

	// ReadPool, when set, is a pool on a read replica (a streaming standby) of New's database:
	// every page reads from it, while every action (retry, cancel, pause, resume) goes to New's
	// pool, the primary. Each page says how far behind the replica is. Defaults to nil: pages
	// read from New's pool. See docs/operations.md, "Production topology".
	ReadPool *pgxpool.Pool
}

func (c Config) withDefaults() (Config, error) {
	c.Prefix = strings.TrimRight(c.Prefix, "/")
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, "?#\\ \"'<>")) {
		return c, fmt.Errorf("dashboard: Prefix %q must be a path starting with /", c.Prefix)
	}
	if (c.Username == "") != (c.Password == "") {
		return c, errors.New("dashboard: set both Username and Password for basic auth, or neither")
	}
	if c.Token != "" && len(c.Token) < 16 {
		return c, errors.New("dashboard: Token must be at least 16 characters (NewToken makes one)")
	}
	if !c.ReadOnly && c.Token == "" && c.Username == "" {
		return c, errors.New("dashboard: give Config a Token or a Username and Password, or set ReadOnly")
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = 5 * time.Second
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = 10 * time.Second
	}
	if len(c.SecretKey) == 0 {
		c.SecretKey = make([]byte, 32)
		if _, err := rand.Read(c.SecretKey); err != nil {
			return c, fmt.Errorf("dashboard: secret key: %w", err)
		}
	} else if len(c.SecretKey) < 16 {
		return c, errors.New("dashboard: SecretKey must be at least 16 bytes")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// hasCredentials reports whether any way of authenticating is configured.
func (c Config) hasCredentials() bool { return c.Token != "" || c.Username != "" }

// NewToken returns a random token for Config.Token: 32 random bytes, base64url-encoded.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
