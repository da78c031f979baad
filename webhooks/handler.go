package webhooks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxBodyBytes bounds a callback's body when Config.MaxBodyBytes is 0: 256 KiB, far
// above what Resend and Twilio send.
const DefaultMaxBodyBytes = 256 << 10

// DefaultTolerance is how far a Resend (Svix) timestamp may be from the handler's clock, either
// way, when Config.Tolerance is 0: 5 minutes, as Svix's libraries allow.
const DefaultTolerance = 5 * time.Minute

// Config configures the webhook handler. A provider whose secret is empty is not served: its
// route answers 404 saying so.
type Config struct {
	// Prefix is the path the routes hang under: Prefix+"/resend" and Prefix+"/twilio". Defaults
	// to "/webhooks".
	Prefix string

	// ResendSecret is the Resend webhook's signing secret, "whsec_" followed by base64
	// (TASKORCH_RESEND_WEBHOOK_SECRET). Empty: /resend is not served.
	ResendSecret string

	// TwilioAuthToken is the Twilio account's auth token, which signs its callbacks
	// (TASKORCH_TWILIO_AUTH_TOKEN, the one the Twilio provider sends with). Empty: /twilio is not
	// served.
	TwilioAuthToken string

	// TwilioURL is the public URL Twilio calls for status callbacks, exactly as given to Twilio
	// (TASKORCH_TWILIO_WEBHOOK_URL), e.g. https://hooks.example.com/webhooks/twilio: Twilio signs
	// the URL it called, which a handler behind a proxy or a load balancer cannot see. A query
	// string the request carries is appended when TwilioURL has none. Defaults to the URL the
	// request reached this handler at (http, or https when the connection is TLS, with the Host
	// header).
	TwilioURL string

	// MaxBodyBytes bounds a request's body; a larger one is refused with 413. Defaults to
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// Tolerance is how far a Resend timestamp may be from now, either way, before the request is
	// refused as replayed. Defaults to DefaultTolerance.
	Tolerance time.Duration

	// Logger receives a line per refused or ignored request and per database error. Defaults to
	// discarding them.
	Logger *slog.Logger
}

// Handler serves the providers' callbacks. Make one with NewHandler.
type Handler struct {
	pool      *pgxpool.Pool
	cfg       Config
	resendKey []byte
	twilioURL *url.URL
	log       *slog.Logger
	mux       *http.ServeMux
	now       func() time.Time
}

// NewHandler returns the handler over pool, which must hold the comms migrations (0005 and
// later). A malformed secret or URL is an error naming the setting.
func NewHandler(pool *pgxpool.Pool, cfg Config) (*Handler, error) {
	if pool == nil {
		return nil, errors.New("webhooks: NewHandler needs a *pgxpool.Pool")
	}
	h := &Handler{pool: pool, cfg: cfg, log: cfg.Logger, now: time.Now}
	if h.cfg.Prefix == "" {
		h.cfg.Prefix = "/webhooks"
	}
	h.cfg.Prefix = "/" + strings.Trim(h.cfg.Prefix, "/")
	if h.cfg.MaxBodyBytes <= 0 {
		h.cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if h.cfg.Tolerance <= 0 {
		h.cfg.Tolerance = DefaultTolerance
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if cfg.ResendSecret != "" {
		b64, ok := strings.CutPrefix(cfg.ResendSecret, "whsec_")
		key, err := base64.StdEncoding.DecodeString(b64)
		if !ok || err != nil || len(key) == 0 {
			return nil, errors.New("webhooks: the Resend webhook secret must be whsec_ followed by base64, as Resend shows it (TASKORCH_RESEND_WEBHOOK_SECRET)")
		}
		h.resendKey = key
	}
	if cfg.TwilioAuthToken != "" && strings.ContainsFunc(cfg.TwilioAuthToken, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	}) {
		return nil, errors.New("webhooks: the Twilio auth token must be letters and digits (TASKORCH_TWILIO_AUTH_TOKEN)")
	}
	if cfg.TwilioURL != "" {
		u, err := url.Parse(cfg.TwilioURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("webhooks: the Twilio webhook URL %q is not an absolute http(s) URL (TASKORCH_TWILIO_WEBHOOK_URL)", cfg.TwilioURL)
		}
		h.twilioURL = u
	}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc(h.cfg.Prefix+"/resend", h.serveResend)
	h.mux.HandleFunc(h.cfg.Prefix+"/twilio", h.serveTwilio)
	return h, nil
}

// Routes lists the paths the handler serves, with whether each provider is configured.
func (h *Handler) Routes() map[string]bool {
	return map[string]bool{
		h.cfg.Prefix + "/resend": h.resendKey != nil,
		h.cfg.Prefix + "/twilio": h.cfg.TwilioAuthToken != "",
	}
}

// ServeHTTP serves POST <Prefix>/resend and POST <Prefix>/twilio.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// refusal is a request refused before anything was recorded: its status and why.
type refusal struct {
	status int
	reason string
}

func (e *refusal) Error() string { return e.reason }

func refuse(status int, format string, args ...any) *refusal {
	return &refusal{status: status, reason: fmt.Sprintf(format, args...)}
}

// precheck answers what every route answers before reading a body: the method, whether the
// provider is configured. False when it has answered.
func (h *Handler) precheck(w http.ResponseWriter, r *http.Request, provider string, configured bool, env string) bool {
	if !configured {
		http.Error(w, fmt.Sprintf("%s webhooks are not configured here (set %s)", provider, env), http.StatusNotFound)
		return false
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return false
	}
	return true
}

// readBody reads the request's body up to the bound.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *refusal) {
	limit := h.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, refuse(http.StatusRequestEntityTooLarge, "body of %d bytes is over the limit of %d bytes", r.ContentLength, limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, refuse(http.StatusRequestEntityTooLarge, "body is over the limit of %d bytes", limit)
	}
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "reading the body: %v", err)
	}
	return body, nil
}

// refused records a refusal in queues.error and answers it.
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, provider string, rf *refusal, info map[string]any) {
	if info == nil {
		info = map[string]any{}
	}
	info["status"] = rf.status
	info["remote_addr"] = r.RemoteAddr
	info["path"] = r.URL.Path
	ctxJSON, _ := json.Marshal(info)
	if _, err := h.pool.Exec(r.Context(), `select comms.record_webhook_refusal($1, $2, $3::jsonb)`, provider, rf.reason, string(ctxJSON)); err != nil {
		h.log.Error("webhook: recording a refusal failed", "provider", provider, "reason", rf.reason, "error", err)
	}
	h.log.Warn("webhook refused", "provider", provider, "status", rf.status, "reason", rf.reason, "remote_addr", r.RemoteAddr)
	http.Error(w, rf.reason, rf.status)
}

// recorded answers the outcome of a recording function; an unknown attempt was recorded in
// queues.error by the function itself.
func (h *Handler) recorded(w http.ResponseWriter, provider, event, id, outcome string) {
	switch outcome {
	case "recorded", "duplicate":
		h.log.Info("webhook", "provider", provider, "event", event, "provider_message_id", id, "outcome", outcome)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintf(w, "%s\n", outcome)
	case "unknown_attempt":
		h.log.Warn("webhook refused", "provider", provider, "event", event, "provider_message_id", id, "status", http.StatusNotFound,
			"reason", "no attempt has this provider message id")
		http.Error(w, fmt.Sprintf("no attempt has provider message id %q", id), http.StatusNotFound)
	default:
		h.log.Error("webhook: unexpected outcome", "provider", provider, "outcome", outcome)
		http.Error(w, "unexpected outcome", http.StatusInternalServerError)
	}
}

// ignored answers an event the package does not record.
func (h *Handler) ignored(w http.ResponseWriter, provider, event, id string) {
	h.log.Info("webhook ignored: not a delivery outcome taskorch records", "provider", provider, "event", event, "provider_message_id", id)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "ignored %s\n", event)
}

// dbFailed answers a database error: invalid input (class 22: a NUL character, say) is the
// sender's fault and refused with 400; anything else is 500, which the provider retries.
func (h *Handler) dbFailed(w http.ResponseWriter, r *http.Request, provider string, err error, info map[string]any) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		h.refused(w, r, provider, refuse(http.StatusBadRequest, "the database refused the event: %s", pgErr.Message), info)
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	h.log.Error("webhook: recording failed", "provider", provider, "error", err)
	http.Error(w, "could not record the event; try again", http.StatusInternalServerError)
}
