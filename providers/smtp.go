package providers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"
	mailsmtp "github.com/wneessen/go-mail/smtp"

	"github.com/taskorch/taskorch"
)

// SMTPConfig configures an SMTP provider.
type SMTPConfig struct {
	// URL says where and how to connect (see ParseSMTPURL for the grammar), e.g.
	// "smtp://user:pass@mail.example.com:587?starttls=required". Required.
	URL string
	// From is the sender of requests without one.
	From string
	// Timeout bounds each step of the conversation (connect, each command). Defaults to
	// DefaultTimeout.
	Timeout time.Duration
}

// SMTPSettings is an SMTP URL parsed.
type SMTPSettings struct {
	Host string
	Port int
	// ImplicitTLS is true for smtps://: TLS from the first byte.
	ImplicitTLS bool
	// StartTLS is "required", "opportunistic" or "none" (smtp:// only).
	StartTLS string
	// Auth is the SASL mechanism: "plain", "login", "cram-md5", "scram-sha-1",
	// "scram-sha-256" or "none".
	Auth     string
	Username string
	Password string
	// CAFile, when set, is a PEM file of the certificate authorities to trust instead of the
	// system's.
	CAFile string
	// InsecureSkipVerify turns certificate verification off (development only).
	InsecureSkipVerify bool
	// HELO is the name the client gives in EHLO. Defaults to the machine's hostname.
	HELO string
}

// ParseSMTPURL parses an SMTP URL:
//
//	smtp://[user[:password]@]host[:port][?param=value&...]    port 587, STARTTLS
//	smtps://[user[:password]@]host[:port][?param=value&...]   port 465, implicit TLS
//
// The user and password are percent-encoded (a password "p@ss" is written "p%40ss"); with a
// user the client authenticates (AUTH PLAIN unless auth= says otherwise). Parameters:
//
//	starttls=required|opportunistic|none   smtp:// only; default required: refuse a server
//	                                       without STARTTLS. opportunistic upgrades when offered.
//	auth=plain|login|cram-md5|scram-sha-1|scram-sha-256|none
//	                                       default plain with a user, none without.
//	ca_file=/path/ca.pem                   trust these CAs instead of the system's (tests, dev).
//	insecure_skip_verify=true              no certificate check (development only).
//	helo=name                              the EHLO name; default the hostname.
//
// A password is never sent over an unencrypted connection, except to localhost. An unknown
// parameter is an error, so a typo does not silently weaken the connection.
func ParseSMTPURL(raw string) (SMTPSettings, error) {
	var s SMTPSettings
	u, err := url.Parse(raw)
	if err != nil {
		// url's errors quote the whole URL, password included.
		return s, errors.New("TASKORCH_SMTP_URL is not a URL: want smtp://user:pass@host:587?starttls=required")
	}
	switch u.Scheme {
	case "smtp":
		s.Port, s.StartTLS = 587, "required"
	case "smtps":
		s.Port, s.ImplicitTLS, s.StartTLS = 465, true, "none"
	default:
		return s, fmt.Errorf("TASKORCH_SMTP_URL: the scheme must be smtp or smtps, not %q", u.Scheme)
	}
	s.Host = u.Hostname()
	if s.Host == "" {
		return s, errors.New("TASKORCH_SMTP_URL has no host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return s, fmt.Errorf("TASKORCH_SMTP_URL: bad port %q", p)
		}
		s.Port = n
	}
	if u.User != nil {
		s.Username = u.User.Username()
		s.Password, _ = u.User.Password()
		s.Auth = "plain"
	} else {
		s.Auth = "none"
	}
	for name, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch name {
		case "starttls":
			if s.ImplicitTLS {
				return s, errors.New("TASKORCH_SMTP_URL: starttls does not apply to smtps:// (TLS from the start)")
			}
			switch v {
			case "required", "opportunistic", "none":
				s.StartTLS = v
			default:
				return s, fmt.Errorf("TASKORCH_SMTP_URL: starttls=%q: want required, opportunistic or none", v)
			}
		case "auth":
			switch strings.ToLower(v) {
			case "plain", "login", "cram-md5", "scram-sha-1", "scram-sha-256", "none":
				s.Auth = strings.ToLower(v)
			default:
				return s, fmt.Errorf("TASKORCH_SMTP_URL: auth=%q: want plain, login, cram-md5, scram-sha-1, scram-sha-256 or none", v)
			}
		case "ca_file":
			s.CAFile = v
		case "insecure_skip_verify":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return s, fmt.Errorf("TASKORCH_SMTP_URL: insecure_skip_verify=%q is not true or false", v)
			}
			s.InsecureSkipVerify = b
		case "helo":
			s.HELO = v
		default:
			return s, fmt.Errorf("TASKORCH_SMTP_URL: unknown parameter %q (known: starttls, auth, ca_file, insecure_skip_verify, helo)", name)
		}
	}
	if s.Auth != "none" && s.Username == "" {
		return s, fmt.Errorf("TASKORCH_SMTP_URL: auth=%s needs a user in the URL", s.Auth)
	}
	return s, nil
}

// redacted returns the URL of s without its password.
func (s SMTPSettings) redacted() string {
	scheme := "smtp"
	if s.ImplicitTLS {
		scheme = "smtps"
	}
	user := ""
	if s.Username != "" {
		user = url.User(s.Username).String()
		if s.Password != "" {
			user += ":[REDACTED]"
		}
		user += "@"
	}
	return fmt.Sprintf("%s://%s%s", scheme, user, net.JoinHostPort(s.Host, strconv.Itoa(s.Port)))
}

// SMTP sends email to an SMTP server (submission, port 587 with STARTTLS, or 465 with TLS)
// with github.com/wneessen/go-mail, one connection per message. SMTP has no idempotency key: a
// call repeated after a lost answer may deliver the message twice.
type SMTP struct {
	s       SMTPSettings
	tls     *tls.Config
	from    string
	timeout time.Duration
	red     redactor
}

// NewSMTP returns an SMTP provider.
func NewSMTP(cfg SMTPConfig) (*SMTP, error) {
	if cfg.URL == "" {
		return nil, errors.New("smtp: the URL is empty (TASKORCH_SMTP_URL)")
	}
	s, err := ParseSMTPURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("smtp: %w", err)
	}
	tc := &tls.Config{ServerName: s.Host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.InsecureSkipVerify} //nolint:gosec // opt-in, development only
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("smtp: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("smtp: ca_file %s holds no PEM certificate", s.CAFile)
		}
		tc.RootCAs = pool
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &SMTP{s: s, tls: tc, from: cfg.From, timeout: timeout, red: newRedactor(s.Password, url.QueryEscape(s.Password), url.PathEscape(s.Password))}, nil
}

// Call sends the email of call.Request (an EmailRequest) and returns
// {"provider":"smtp","message_id":"<...>"}: the Message-ID header it gave the message.
func (p *SMTP) Call(ctx context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
	req, err := parseEmail("smtp", call, p.from, true)
	if err != nil {
		return nil, err
	}
	msg := mail.NewMsg()
	if err := msg.From(req.From); err != nil {
		return nil, badRequest("smtp", `"from" %q: %v`, req.From, err)
	}
	if err := msg.To(req.To); err != nil {
		return nil, badRequest("smtp", `"to" %q: %v`, req.To, err)
	}
	if req.ReplyTo != "" {
		if err := msg.ReplyTo(req.ReplyTo); err != nil {
			return nil, badRequest("smtp", `"reply_to" %q: %v`, req.ReplyTo, err)
		}
	}
	msg.Subject(req.Subject)
	switch {
	case req.Text != "" && req.HTML != "":
		msg.SetBodyString(mail.TypeTextPlain, req.Text)
		msg.AddAlternativeString(mail.TypeTextHTML, req.HTML)
	case req.Text != "":
		msg.SetBodyString(mail.TypeTextPlain, req.Text)
	default:
		msg.SetBodyString(mail.TypeTextHTML, req.HTML)
	}
	msg.SetDate()
	msg.SetMessageID()

	// go-mail bounds each step with its timeout; closing the connection when ctx ends cuts a
	// step short too.
	var stop func() bool
	dial := func(dctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		var err error
		if p.s.ImplicitTLS {
			d := tls.Dialer{NetDialer: &net.Dialer{}, Config: p.tls.Clone()}
			conn, err = d.DialContext(dctx, network, addr)
		} else {
			var d net.Dialer
			conn, err = d.DialContext(dctx, network, addr)
		}
		if err == nil {
			stop = context.AfterFunc(ctx, func() { _ = conn.Close() })
		}
		return conn, err
	}
	policy := mail.TLSMandatory
	switch p.s.StartTLS {
	case "opportunistic":
		policy = mail.TLSOpportunistic
	case "none":
		policy = mail.NoTLS
	}
	opts := []mail.Option{
		mail.WithPort(p.s.Port),
		mail.WithTimeout(p.timeout),
		mail.WithTLSPolicy(policy),
		mail.WithTLSConfig(p.tls.Clone()),
		mail.WithDialContextFunc(dial),
	}
	if p.s.Auth != "none" {
		opts = append(opts, mail.WithSMTPAuth(smtpAuthType(p.s.Auth)), mail.WithUsername(p.s.Username), mail.WithPassword(p.s.Password))
	}
	if p.s.HELO != "" {
		opts = append(opts, mail.WithHELO(p.s.HELO))
	}
	c, err := mail.NewClient(p.s.Host, opts...)
	if err != nil {
		return nil, p.red.newError("smtp", 0, "", "client: "+err.Error(), true).result()
	}
	err = c.DialAndSendWithContext(ctx, msg)
	if stop != nil {
		stop()
	}
	if err != nil {
		return nil, p.classify(ctx, err)
	}
	return json.Marshal(map[string]string{"provider": "smtp", "message_id": msg.GetMessageID()})
}

func smtpAuthType(name string) mail.SMTPAuthType {
	switch name {
	case "login":
		return mail.SMTPAuthLogin
	case "cram-md5":
		return mail.SMTPAuthCramMD5
	case "scram-sha-1":
		return mail.SMTPAuthSCRAMSHA1
	case "scram-sha-256":
		return mail.SMTPAuthSCRAMSHA256
	}
	return mail.SMTPAuthPlain
}

// smtpRateLimited reports the replies servers give a client that sends too much: 421 (service
// not available, closing: also a server's "too many connections") and 451 (local error in
// processing: also "too many messages, try later"). SMTP has no Retry-After.
func smtpRateLimited(code int) bool { return code == 421 || code == 451 }

// classify maps a go-mail error: a 421 or 451 reply is a rate limit (smtpRateLimited), another
// 5xx reply is permanent, a 4xx temporary; a server without
// STARTTLS when it is required, a refused certificate and a password that would go out in
// clear are permanent (configuration); the rest (connection, timeouts) is retriable.
func (p *SMTP) classify(ctx context.Context, err error) error {
	msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "dial failed: "), "send failed: ")
	var sendErr *mail.SendError
	var tpErr *textproto.Error
	var certErr *tls.CertificateVerificationError
	var hostErr x509.HostnameError
	var authorityErr x509.UnknownAuthorityError
	switch {
	case errors.As(err, &sendErr) && smtpRateLimited(sendErr.ErrorCode()):
		return p.red.rateLimited("smtp", sendErr.ErrorCode(), "", msg, 0)
	case errors.As(err, &tpErr) && smtpRateLimited(tpErr.Code):
		return p.red.rateLimited("smtp", tpErr.Code, "", msg, 0)
	case errors.As(err, &sendErr) && sendErr.ErrorCode() != 0:
		return p.red.newError("smtp", sendErr.ErrorCode(), "", msg, sendErr.ErrorCode() >= 500).result()
	case errors.As(err, &tpErr):
		if strings.Contains(msg, "SMTP AUTH failed") {
			msg = "authentication failed: " + tpErr.Msg
		}
		return p.red.newError("smtp", tpErr.Code, "", msg, tpErr.Code >= 500).result()
	case errors.Is(err, mailsmtp.ErrUnencrypted):
		return p.red.newError("smtp", 0, "", "refusing to send the password over an unencrypted connection: use starttls=required or smtps://", true).result()
	case strings.Contains(msg, "does not support STARTTLS"):
		return p.red.newError("smtp", 0, "", "the server does not offer STARTTLS and the URL requires it (starttls=required): "+msg, true).result()
	case strings.Contains(msg, "does not support SMTP AUTH"):
		return p.red.newError("smtp", 0, "", "the server does not offer AUTH but the URL has a user: "+msg, true).result()
	case errors.As(err, &certErr), errors.As(err, &hostErr), errors.As(err, &authorityErr):
		return p.red.newError("smtp", 0, "", "the server's certificate was refused (see ca_file in docs/providers.md): "+msg, true).result()
	}
	return p.red.transportError(ctx, "smtp", errors.New(msg))
}
