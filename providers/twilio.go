package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	twclient "github.com/twilio/twilio-go/client"
	twapi "github.com/twilio/twilio-go/rest/api/v2010"

	"github.com/taskorch/taskorch"
)

// TwilioConfig configures a Twilio provider.
type TwilioConfig struct {
	// AccountSID (AC...) and AuthToken authenticate. Required.
	AccountSID string
	AuthToken  string
	// From is the sender of requests without one: a number in E.164 form or a Messaging
	// Service SID (MG...).
	From string
	// BaseURL sends every request to this scheme, host and path prefix instead of
	// https://api.twilio.com (the paths stay Twilio's: /2010-04-01/Accounts/.../Messages.json).
	// For tests and proxies. Defaults to Twilio's hosts (honouring TWILIO_EDGE and
	// TWILIO_REGION as the SDK does).
	BaseURL string
	// Timeout bounds one call. Defaults to DefaultTimeout. Ignored with HTTPClient.
	Timeout time.Duration
	// HTTPClient makes the requests (its transport is wrapped). Defaults to a client with
	// Timeout that does not follow redirects.
	HTTPClient *http.Client
}

// Twilio sends SMS through Twilio's Messages API with its official Go SDK. Twilio has no
// idempotency key: a call repeated after a lost answer (a timeout, a crash before the success
// handler) may send the message twice.
type Twilio struct {
	cfg  TwilioConfig
	base *url.URL
	hc   *http.Client
	red  redactor
}

var alphanumeric = regexp.MustCompile(`^[A-Za-z0-9]+$`)

// NewTwilio returns a Twilio provider.
func NewTwilio(cfg TwilioConfig) (*Twilio, error) {
	switch {
	case cfg.AccountSID == "":
		return nil, errors.New("twilio: the account SID is empty (TASKORCH_TWILIO_ACCOUNT_SID)")
	case cfg.AuthToken == "":
		return nil, errors.New("twilio: the auth token is empty (TASKORCH_TWILIO_AUTH_TOKEN)")
	case !alphanumeric.MatchString(cfg.AccountSID):
		return nil, errors.New("twilio: the account SID must be letters and digits (TASKORCH_TWILIO_ACCOUNT_SID)")
	case !alphanumeric.MatchString(cfg.AuthToken):
		return nil, errors.New("twilio: the auth token must be letters and digits (TASKORCH_TWILIO_AUTH_TOKEN)")
	}
	p := &Twilio{cfg: cfg, red: newRedactor(cfg.AuthToken)}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("twilio: the base URL %q is not an http(s) URL (TASKORCH_TWILIO_BASE_URL)", cfg.BaseURL)
		}
		p.base = u
	}
	p.hc = cfg.HTTPClient
	if p.hc == nil {
		timeout := cfg.Timeout
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		p.hc = &http.Client{
			Timeout:       timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return p, nil
}

// twilioError is the body of Twilio's error answers.
type twilioError struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info"`
	Status   int    `json:"status"`
}

// Call sends the SMS of call.Request (an SMSRequest) and returns
// {"provider":"twilio","sid":"SM...","status":"queued"}.
func (p *Twilio) Call(ctx context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
	req, err := parseSMS("twilio", call, p.cfg.From, true)
	if err != nil {
		return nil, err
	}
	// The SDK makes its requests without a context: this call's transport gives them ctx
	// (and the base URL), and records the answer.
	x := &exchange{}
	hc := *p.hc
	hc.Transport = &recordingTransport{next: p.hc.Transport, fixed: x, ctx: ctx, base: p.base}
	c := &twclient.Client{Credentials: twclient.NewCredentials(p.cfg.AccountSID, p.cfg.AuthToken), HTTPClient: &hc}
	c.SetAccountSid(p.cfg.AccountSID)
	api := twapi.NewApiServiceWithClient(c)

	params := (&twapi.CreateMessageParams{}).SetTo(req.To).SetBody(req.Body)
	if strings.HasPrefix(req.From, "MG") && !strings.HasPrefix(req.From, "+") {
		params.SetMessagingServiceSid(req.From)
	} else {
		params.SetFrom(req.From)
	}
	msg, err := api.CreateMessage(params)
	var uerr *url.Error
	if p.base != nil && errors.As(err, &uerr) {
		// Name the host the request went to, not the SDK's.
		err = &url.Error{Op: uerr.Op, URL: p.rewrite(uerr.URL), Err: uerr.Err}
	}
	switch {
	case x.status == 0 && err != nil:
		return nil, p.red.transportError(ctx, "twilio", err)
	case x.status >= 200 && x.status < 300 && err != nil:
		return nil, p.red.unparseable("twilio", x.status, err)
	case x.status >= 200 && x.status < 300 && (msg == nil || msg.Sid == nil || *msg.Sid == ""):
		return nil, p.red.unparseable("twilio", x.status, fmt.Errorf("no message sid in %q", snippet(x.body)))
	case x.status >= 300:
		return nil, p.statusError(x)
	case err != nil:
		return nil, p.red.transportError(ctx, "twilio", err)
	}
	out := map[string]string{"provider": "twilio", "sid": *msg.Sid}
	if msg.Status != nil {
		out["status"] = *msg.Status
	}
	return json.Marshal(out)
}

// rewrite returns raw on the base URL's host, as recordingTransport sends it.
func (p *Twilio) rewrite(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Scheme, u.Host = p.base.Scheme, p.base.Host
	u.Path = path.Join("/", p.base.Path, u.Path)
	return u.String()
}

func (p *Twilio) statusError(x *exchange) error {
	var body twilioError
	if err := json.Unmarshal(x.body, &body); err != nil || (body.Code == 0 && body.Message == "") {
		if x.status == http.StatusTooManyRequests {
			return p.red.rateLimited("twilio", x.status, "", "too many requests: "+snippet(x.body), parseRetryAfter(x.retryAfter, time.Now()))
		}
		return p.red.httpStatusError("twilio", x.status, "", "unexpected answer: "+snippet(x.body))
	}
	code := ""
	if body.Code != 0 {
		code = strconv.Itoa(body.Code)
	}
	msg := body.Message
	if body.MoreInfo != "" {
		msg += " (" + body.MoreInfo + ")"
	}
	if x.status == http.StatusTooManyRequests || body.Code == 20429 {
		return p.red.rateLimited("twilio", x.status, code, msg, parseRetryAfter(x.retryAfter, time.Now()))
	}
	return p.red.httpStatusError("twilio", x.status, code, msg)
}
