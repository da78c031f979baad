package providers_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/providers"
)

const (
	smtpUser = "mailer"
	smtpPass = "s3cret p@ss/word"
)

// smtpMode is how the test server offers TLS.
type smtpMode int

const (
	smtpSTARTTLS smtpMode = iota // plain connection, STARTTLS offered
	smtpPlain                    // no TLS at all
	smtpImplicit                 // TLS from the first byte (smtps)
)

// smtpServer is a real SMTP server (emersion/go-smtp) in the test: STARTTLS with a certificate
// made here, AUTH PLAIN (only over TLS), and a recipient reply chosen by the test.
type smtpServer struct {
	addr   string
	caFile string
	// rcptErr is the reply to RCPT TO, nil for 250.
	rcptErr error

	mu       sync.Mutex
	received []smtpReceived
	auths    int
}

type smtpReceived struct {
	from, to string
	data     []byte
	tls      bool
}

func newSMTPServer(t *testing.T, mode smtpMode, rcptErr error) *smtpServer {
	t.Helper()
	s := &smtpServer{rcptErr: rcptErr}
	cert, caFile := selfSignedCert(t)
	s.caFile = caFile
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{srv: s, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.ErrorLog = smtpNopLogger{}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	var ln net.Listener
	var err error
	switch mode {
	case smtpSTARTTLS:
		srv.TLSConfig = tlsConfig
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	case smtpPlain:
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	case smtpImplicit:
		ln, err = tls.Listen("tcp", "127.0.0.1:0", tlsConfig)
	}
	require.NoError(t, err)
	s.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

type smtpNopLogger struct{}

func (smtpNopLogger) Printf(string, ...any) {}
func (smtpNopLogger) Println(...any)        {}

func (s *smtpServer) url(scheme, user, pass, query string) string {
	u := url.URL{Scheme: scheme, Host: s.addr, RawQuery: query}
	if user != "" {
		u.User = url.UserPassword(user, pass)
	}
	return u.String()
}

func (s *smtpServer) messages() []smtpReceived {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]smtpReceived(nil), s.received...)
}

func (s *smtpServer) authAttempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auths
}

type smtpSession struct {
	srv      *smtpServer
	conn     *smtp.Conn
	from, to string
}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		s.srv.mu.Lock()
		s.srv.auths++
		s.srv.mu.Unlock()
		if username != smtpUser || password != smtpPass {
			return smtp.ErrAuthFailed
		}
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error { s.from = from; return nil }

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.srv.rcptErr != nil {
		return s.srv.rcptErr
	}
	s.to = to
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.srv.mu.Lock()
	s.srv.received = append(s.srv.received, smtpReceived{from: s.from, to: s.to, data: b, tls: isTLS})
	s.srv.mu.Unlock()
	return nil
}

func (s *smtpSession) Reset()        {}
func (s *smtpSession) Logout() error { return nil }

// selfSignedCert makes a certificate for 127.0.0.1 and localhost and writes it, as the CA to
// trust, to a PEM file.
func selfSignedCert(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "taskorch test SMTP"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, certPEM, 0o600))
	return cert, caFile
}

func newSMTP(t *testing.T, rawURL string) *providers.SMTP {
	t.Helper()
	p, err := providers.NewSMTP(providers.SMTPConfig{URL: rawURL, From: "Taskorch <noreply@example.com>", Timeout: 10 * time.Second})
	require.NoError(t, err)
	return p
}

func TestSMTPSendsOverSTARTTLSWithAuth(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t, smtpSTARTTLS, nil)
	p := newSMTP(t, srv.url("smtp", smtpUser, smtpPass, "starttls=required&ca_file="+url.QueryEscape(srv.caFile)))
	resp, err := p.Call(t.Context(), call(t, map[string]any{
		"to": "Ada Lovelace <ada@example.com>", "subject": "Welcome, Ada", "text": "Hello Ada",
		"html": "<p>Hello <b>Ada</b></p>", "reply_to": "help@example.com", "send_email_attempt_id": 7,
	}))
	require.NoError(t, err)
	out := decode(t, resp)
	require.Equal(t, "smtp", out["provider"])

	got := srv.messages()
	require.Len(t, got, 1)
	require.True(t, got[0].tls, "the message must travel over TLS")
	require.Equal(t, "noreply@example.com", got[0].from)
	require.Equal(t, "ada@example.com", got[0].to)
	msg, err := mail.ReadMessage(bytes.NewReader(got[0].data))
	require.NoError(t, err)
	require.Equal(t, out["message_id"], msg.Header.Get("Message-Id"))
	require.Equal(t, "Welcome, Ada", msg.Header.Get("Subject"))
	require.Contains(t, msg.Header.Get("From"), "noreply@example.com")
	require.Contains(t, msg.Header.Get("To"), "ada@example.com")
	require.Contains(t, msg.Header.Get("Reply-To"), "help@example.com")
	require.NotEmpty(t, msg.Header.Get("Date"))

	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/alternative", mediaType)
	parts := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		b, err := io.ReadAll(part)
		require.NoError(t, err)
		parts[ct] = strings.TrimSpace(string(b))
	}
	require.Equal(t, map[string]string{"text/plain": "Hello Ada", "text/html": "<p>Hello <b>Ada</b></p>"}, parts)
}

func TestSMTPImplicitTLS(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t, smtpImplicit, nil)
	p := newSMTP(t, srv.url("smtps", smtpUser, smtpPass, "ca_file="+url.QueryEscape(srv.caFile)))
	_, err := p.Call(t.Context(), call(t, `{"to":"a@example.com","from":"b@example.com","subject":"s","html":"<i>x</i>"}`))
	require.NoError(t, err)
	got := srv.messages()
	require.Len(t, got, 1)
	require.True(t, got[0].tls)
	require.Equal(t, "b@example.com", got[0].from)
	msg, err := mail.ReadMessage(bytes.NewReader(got[0].data))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(msg.Header.Get("Content-Type"), "text/html"))
}

func TestSMTPAuthFailure(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t, smtpSTARTTLS, nil)
	const wrong = "wrong-Passw0rd-77"
	p := newSMTP(t, srv.url("smtp", smtpUser, wrong, "ca_file="+url.QueryEscape(srv.caFile)))
	_, err := p.Call(t.Context(), call(t, `{"to":"a@example.com","subject":"s","text":"t"}`))
	pe := requirePermanent(t, err)
	require.Equal(t, 535, pe.StatusCode)
	require.Contains(t, err.Error(), "smtp: 535: authentication failed: ")
	requireNoSecret(t, err, wrong, smtpPass)
	require.Equal(t, 1, srv.authAttempts())
	require.Empty(t, srv.messages())
}

func TestSMTPReplies(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		reply       *smtp.SMTPError
		permanent   bool
		rateLimited bool
	}{
		{"permanent 550", &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user here"}, true, false},
		{"temporary 450", &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "Mailbox busy"}, false, false},
		{"slow down 451", &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Try again later"}, false, true},
		{"slow down 421", &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many messages, closing"}, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newSMTPServer(t, smtpSTARTTLS, tt.reply)
			p := newSMTP(t, srv.url("smtp", smtpUser, smtpPass, "ca_file="+url.QueryEscape(srv.caFile)))
			_, err := p.Call(t.Context(), call(t, `{"to":"nobody@example.com","subject":"s","text":"t"}`))
			var pe *providers.Error
			if tt.permanent {
				pe = requirePermanent(t, err)
			} else {
				pe = requireRetriable(t, err)
			}
			require.Equal(t, tt.reply.Code, pe.StatusCode)
			var rl *taskorch.RateLimitedError
			require.Equal(t, tt.rateLimited, errors.As(err, &rl), "rate limited: %v", err)
			require.Equal(t, tt.rateLimited, pe.RateLimited)
			require.Contains(t, err.Error(), fmt.Sprintf("smtp: %d: ", tt.reply.Code))
			require.Contains(t, err.Error(), tt.reply.Message)
			requireNoSecret(t, err, smtpPass)
		})
	}
}

func TestSMTPRequiredSTARTTLSRefusesAServerWithoutIt(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t, smtpPlain, nil)
	p := newSMTP(t, srv.url("smtp", smtpUser, smtpPass, "starttls=required"))
	_, err := p.Call(t.Context(), call(t, `{"to":"a@example.com","subject":"s","text":"t"}`))
	requirePermanent(t, err)
	require.Contains(t, err.Error(), "smtp: the server does not offer STARTTLS and the URL requires it (starttls=required)")
	requireNoSecret(t, err, smtpPass)
	require.Zero(t, srv.authAttempts(), "no password may go out")
	require.Empty(t, srv.messages())
}

func TestSMTPOpportunisticWithoutTLS(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t, smtpPlain, nil)
	p := newSMTP(t, srv.url("smtp", "", "", "starttls=opportunistic"))
	_, err := p.Call(t.Context(), call(t, `{"to":"a@example.com","subject":"s","text":"t"}`))
	require.NoError(t, err)
	got := srv.messages()
	require.Len(t, got, 1)
	require.False(t, got[0].tls)
}

func TestSMTPUntrustedCertificate(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t, smtpSTARTTLS, nil)
	p := newSMTP(t, srv.url("smtp", smtpUser, smtpPass, "")) // the system's CAs do not know it
	_, err := p.Call(t.Context(), call(t, `{"to":"a@example.com","subject":"s","text":"t"}`))
	requirePermanent(t, err)
	require.Contains(t, err.Error(), "smtp: the server's certificate was refused")
	requireNoSecret(t, err, smtpPass)
	require.Zero(t, srv.authAttempts())
}

func TestSMTPUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := newSMTP(t, "smtp://"+smtpUser+":"+url.PathEscape(smtpPass)+"@"+addr)
	_, err = p.Call(t.Context(), call(t, `{"to":"a@example.com","subject":"s","text":"t"}`))
	pe := requireRetriable(t, err)
	require.Contains(t, pe.Error(), "smtp: request failed: ")
	require.Contains(t, pe.Error(), "connection refused")
	requireNoSecret(t, err, smtpPass)
}

func TestParseSMTPURL(t *testing.T) {
	t.Parallel()
	s, err := providers.ParseSMTPURL("smtp://user%40example.com:p%40ss@mail.example.com")
	require.NoError(t, err)
	require.Equal(t, providers.SMTPSettings{Host: "mail.example.com", Port: 587, StartTLS: "required", Auth: "plain",
		Username: "user@example.com", Password: "p@ss"}, s)

	s, err = providers.ParseSMTPURL("smtps://u:p@mail.example.com?auth=login&helo=worker1")
	require.NoError(t, err)
	require.Equal(t, providers.SMTPSettings{Host: "mail.example.com", Port: 465, ImplicitTLS: true, StartTLS: "none",
		Auth: "login", Username: "u", Password: "p", HELO: "worker1"}, s)

	s, err = providers.ParseSMTPURL("smtp://127.0.0.1:2525?starttls=none&insecure_skip_verify=true&ca_file=/x.pem")
	require.NoError(t, err)
	require.Equal(t, providers.SMTPSettings{Host: "127.0.0.1", Port: 2525, StartTLS: "none", Auth: "none",
		CAFile: "/x.pem", InsecureSkipVerify: true}, s)

	for raw, want := range map[string]string{
		"http://u:hunter2secret@h":                "the scheme must be smtp or smtps",
		"smtp://u:hunter2secret@h?starttls=yes":   `starttls="yes"`,
		"smtps://u:hunter2secret@h?starttls=none": "starttls does not apply to smtps://",
		"smtp://u:hunter2secret@h?tls=1":          `unknown parameter "tls"`,
		"smtp://u:hunter2secret@h:99999":          `bad port "99999"`,
		"smtp://h?auth=plain":                     "auth=plain needs a user",
		"smtp://u:hunter2secret@h?auth=ntlm":      `auth="ntlm"`,
		"smtp://u:hunter2secret@/":                "has no host",
		"smtp://u:hunter2secret@h:%zz":            "is not a URL",
	} {
		_, err := providers.ParseSMTPURL(raw)
		require.ErrorContains(t, err, want, raw)
		require.NotContains(t, err.Error(), "hunter2secret", raw)
	}
}

// A server that never greets: cancelling the call's context ends it at once, not after the
// timeout.
func TestSMTPHonoursTheContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		c := <-accepted
		t.Cleanup(func() { _ = c.Close() })
		cancel()
	}()
	p, err := providers.NewSMTP(providers.SMTPConfig{URL: "smtp://" + ln.Addr().String() + "?starttls=none", From: "a@example.com", Timeout: time.Minute})
	require.NoError(t, err)
	start := time.Now()
	_, err = p.Call(ctx, call(t, `{"to":"b@example.com","subject":"s","text":"t"}`))
	requireRetriable(t, err)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 30*time.Second)
}
