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
	"unicode"
	"unicode/utf8"
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

	// Tokens are more tokens, by the name of the person (or tool) each is given to: a request
	// with one, or a session signed in with one, acts as "dashboard:<name>", the actor recorded
	// with every retry, cancel, delete, pause and schedule change it makes (Token's holder acts
	// as "dashboard:token"). Changing a name's token signs that name's sessions out. Names are
	// 1 to 64 characters without spaces or control characters; each token is at least 16
	// characters and given to one name only. Defaults to none.
	Tokens map[string]string

	// Username and Password, when both set, authenticate with HTTP basic auth (acting as
	// "dashboard:<Username>"). Defaults to none.
	Username string
	Password string

	// ReadOnly refuses every action (retry, cancel, delete, pause, resume, schedule changes)
	// and hides their buttons.
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

	// BulkTimeout bounds an action on all the tasks a filter matches: it works in batches of
	// 500 and stops between two after this long, saying how far it got (pressing again goes
	// on). Keep it below the server's write timeout. Defaults to 45s.
	BulkTimeout time.Duration

	// SecretKey signs session and CSRF cookies. Defaults to 32 random bytes, made by New: a
	// restart then signs everyone out. Give several replicas behind one address the same key.
	SecretKey []byte

	// Logger receives errors the dashboard could not show on a page. Defaults to
	// slog.Default().
	Logger *slog.Logger

	// AccessLog, when set, logs every request at info level to Logger once it is answered
	// ("request": method, path, status, bytes, duration, remote address, and who made it — the
	// signed-in person's actor, dashboard:<name>, when known). The query string is left out: a
	// filter may name what an operator looks for, never a credential, but it is not the log's
	// business. Defaults to false.
	AccessLog bool

	// ReadPool, when set, is a pool on a read replica (a streaming standby) of New's database:
	// every page reads from it, while every action (retry, cancel, delete, pause, ...) goes to New's
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
	seen := map[string]string{}
	if c.Token != "" {
		seen[c.Token] = defaultTokenName
	}
	for name, tok := range c.Tokens {
		if !validTokenName(name) {
			return c, fmt.Errorf("dashboard: token name %q: use 1 to 64 characters without spaces or control characters", name)
		}
		if name == defaultTokenName && c.Token != "" {
			return c, fmt.Errorf("dashboard: the name %q is Token's holder's: name the other token otherwise", name)
		}
		if len(tok) < 16 {
			return c, fmt.Errorf("dashboard: the token of %q must be at least 16 characters (NewToken makes one)", name)
		}
		if other, dup := seen[tok]; dup {
			return c, fmt.Errorf("dashboard: %q and %q have the same token: give each its own", other, name)
		}
		seen[tok] = name
	}
	if !c.ReadOnly && !c.hasTokens() && c.Username == "" {
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
	if c.BulkTimeout <= 0 {
		c.BulkTimeout = 45 * time.Second
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
func (c Config) hasCredentials() bool { return c.hasTokens() || c.Username != "" }

// hasTokens reports whether a token is configured: there is a sign-in page.
func (c Config) hasTokens() bool { return c.Token != "" || len(c.Tokens) > 0 }

// defaultTokenName is the name Config.Token's holder acts as.
const defaultTokenName = "token"

// validTokenName: 1 to 64 characters, no space or control character.
func validTokenName(name string) bool {
	if name == "" || utf8.RuneCountInString(name) > 64 || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// NewToken returns a random token for Config.Token: 32 random bytes, base64url-encoded.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
