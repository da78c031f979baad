package providers

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/taskorch/taskorch"
)

// The environment variables ConfigFromEnv reads (docs/configuration.md, "Channel providers").
const (
	EnvEmailProvider     = "TASKORCH_EMAIL_PROVIDER"
	EnvEmailFrom         = "TASKORCH_EMAIL_FROM"
	EnvSMTPURL           = "TASKORCH_SMTP_URL"
	EnvResendAPIKey      = "TASKORCH_RESEND_API_KEY" //nolint:gosec // a variable's name, not a credential
	EnvResendBaseURL     = "TASKORCH_RESEND_BASE_URL"
	EnvSMSProvider       = "TASKORCH_SMS_PROVIDER"
	EnvTwilioAccountSID  = "TASKORCH_TWILIO_ACCOUNT_SID"
	EnvTwilioAuthToken   = "TASKORCH_TWILIO_AUTH_TOKEN" //nolint:gosec // a variable's name, not a credential
	EnvTwilioFrom        = "TASKORCH_TWILIO_FROM"
	EnvTwilioBaseURL     = "TASKORCH_TWILIO_BASE_URL"
	EnvFilesSigner       = "TASKORCH_FILES_SIGNER"
	EnvFilesSignerURL    = "TASKORCH_FILES_SIGNER_URL"
	EnvFilesSignerToken  = "TASKORCH_FILES_SIGNER_TOKEN" //nolint:gosec // a variable's name, not a credential
	EnvS3Endpoint        = "TASKORCH_S3_ENDPOINT"
	EnvS3Region          = "TASKORCH_S3_REGION"
	EnvS3AccessKeyID     = "TASKORCH_S3_ACCESS_KEY_ID"
	EnvS3SecretAccessKey = "TASKORCH_S3_SECRET_ACCESS_KEY" //nolint:gosec // a variable's name, not a credential
	EnvProviderTimeout   = "TASKORCH_PROVIDER_TIMEOUT"
)

// EnvNames lists the variables ConfigFromEnv reads, in documentation order.
var EnvNames = []string{
	EnvEmailProvider, EnvEmailFrom, EnvSMTPURL, EnvResendAPIKey, EnvResendBaseURL,
	EnvSMSProvider, EnvTwilioAccountSID, EnvTwilioAuthToken, EnvTwilioFrom, EnvTwilioBaseURL,
	EnvFilesSigner, EnvFilesSignerURL, EnvFilesSignerToken,
	EnvS3Endpoint, EnvS3Region, EnvS3AccessKeyID, EnvS3SecretAccessKey, EnvProviderTimeout,
}

// SecretEnvNames are the variables that hold credentials: never print their values.
var SecretEnvNames = []string{EnvSMTPURL, EnvResendAPIKey, EnvTwilioAuthToken, EnvFilesSignerToken, EnvS3SecretAccessKey}

// Config chooses and configures the provider of each channel. The zero value configures none:
// a channel without a provider is absent from Channels, and the worker fails its tasks with a
// message naming the variable to set. Its String and LogValue hide every secret.
type Config struct {
	// EmailProvider is "outbox", "smtp", "resend" or "" (no email channel).
	EmailProvider string
	// EmailFrom is the sender of email requests without "from" (smtp, resend).
	EmailFrom string
	// SMTPURL configures smtp: see ParseSMTPURL. Secret (it may hold a password).
	SMTPURL string
	// ResendAPIKey configures resend. Secret.
	ResendAPIKey string
	// ResendBaseURL defaults to DefaultResendBaseURL.
	ResendBaseURL string

	// SMSProvider is "outbox", "twilio" or "" (no sms channel).
	SMSProvider string
	// TwilioAccountSID, TwilioAuthToken (secret) and TwilioFrom configure twilio.
	TwilioAccountSID string
	TwilioAuthToken  string
	TwilioFrom       string
	// TwilioBaseURL defaults to Twilio's API hosts.
	TwilioBaseURL string

	// FilesSigner is "http", "s3", "outbox" or "" (no file_delete channel).
	FilesSigner string
	// FilesSignerURL and FilesSignerToken (secret, optional) configure http.
	FilesSignerURL   string
	FilesSignerToken string
	// S3Endpoint, S3Region (defaults to DefaultS3Region), S3AccessKeyID and S3SecretAccessKey
	// (secret) configure s3.
	S3Endpoint        string
	S3Region          string
	S3AccessKeyID     string
	S3SecretAccessKey string

	// Timeout bounds one provider call. Defaults to DefaultTimeout.
	Timeout time.Duration
}

// ConfigFromEnv reads a Config from the TASKORCH_* variables through getenv (os.Getenv, or a
// lookup that lets flags win). A malformed value (an unknown provider, a bad duration) is an
// error naming the variable; missing settings are reported by Validate.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	c := Config{
		EmailProvider:     strings.ToLower(get(EnvEmailProvider)),
		EmailFrom:         get(EnvEmailFrom),
		SMTPURL:           get(EnvSMTPURL),
		ResendAPIKey:      get(EnvResendAPIKey),
		ResendBaseURL:     get(EnvResendBaseURL),
		SMSProvider:       strings.ToLower(get(EnvSMSProvider)),
		TwilioAccountSID:  get(EnvTwilioAccountSID),
		TwilioAuthToken:   get(EnvTwilioAuthToken),
		TwilioFrom:        get(EnvTwilioFrom),
		TwilioBaseURL:     get(EnvTwilioBaseURL),
		FilesSigner:       strings.ToLower(get(EnvFilesSigner)),
		FilesSignerURL:    get(EnvFilesSignerURL),
		FilesSignerToken:  get(EnvFilesSignerToken),
		S3Endpoint:        get(EnvS3Endpoint),
		S3Region:          get(EnvS3Region),
		S3AccessKeyID:     get(EnvS3AccessKeyID),
		S3SecretAccessKey: get(EnvS3SecretAccessKey),
	}
	var errs error
	if v := get(EnvProviderTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = errors.Join(errs, fmt.Errorf("%s=%q is not a positive Go duration such as 30s", EnvProviderTimeout, v))
		}
		c.Timeout = d
	}
	errs = errors.Join(errs, c.checkChoices())
	return c, errs
}

func (c Config) checkChoices() error {
	var errs error
	check := func(env, v string, allowed ...string) {
		if v == "" {
			return
		}
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		errs = errors.Join(errs, fmt.Errorf("%s=%q: want %s", env, v, strings.Join(allowed, ", ")))
	}
	check(EnvEmailProvider, c.EmailProvider, "outbox", "smtp", "resend")
	check(EnvSMSProvider, c.SMSProvider, "outbox", "twilio")
	check(EnvFilesSigner, c.FilesSigner, "http", "s3", "outbox")
	return errs
}

// Validate reports every chosen provider whose settings are missing or malformed, naming the
// variables.
func (c Config) Validate() error {
	errs := c.checkChoices()
	need := func(provider, env, v string) {
		if v == "" {
			errs = errors.Join(errs, fmt.Errorf("%s needs %s", provider, env))
		}
	}
	// A real provider needs a default sender: a request without "from" (comms.send_email
	// without one, say) would otherwise fail at send time, every one of them.
	switch c.EmailProvider {
	case "smtp":
		need(EnvEmailProvider+"=smtp", EnvSMTPURL, c.SMTPURL)
		if c.SMTPURL != "" {
			if _, err := ParseSMTPURL(c.SMTPURL); err != nil {
				errs = errors.Join(errs, err)
			}
		}
		need(EnvEmailProvider+"=smtp", EnvEmailFrom+" (the sender of emails whose request has no from)", c.EmailFrom)
	case "resend":
		need(EnvEmailProvider+"=resend", EnvResendAPIKey, c.ResendAPIKey)
		need(EnvEmailProvider+"=resend", EnvEmailFrom+" (the sender of emails whose request has no from)", c.EmailFrom)
	}
	if c.SMSProvider == "twilio" {
		need(EnvSMSProvider+"=twilio", EnvTwilioAccountSID, c.TwilioAccountSID)
		need(EnvSMSProvider+"=twilio", EnvTwilioAuthToken, c.TwilioAuthToken)
		need(EnvSMSProvider+"=twilio", EnvTwilioFrom+" (a number or Messaging Service SID that sends SMS whose request has no from)", c.TwilioFrom)
	}
	switch c.FilesSigner {
	case "http":
		need(EnvFilesSigner+"=http", EnvFilesSignerURL, c.FilesSignerURL)
	case "s3":
		need(EnvFilesSigner+"=s3", EnvS3AccessKeyID, c.S3AccessKeyID)
		need(EnvFilesSigner+"=s3", EnvS3SecretAccessKey, c.S3SecretAccessKey)
	}
	return errs
}

// Channels builds the providers Config chooses, by channel task type, for
// taskorch.WorkerConfig.Channels. A channel with no provider chosen is absent. db is only used
// by the outbox provider (and may be nil without it).
func (c Config) Channels(db Querier) (map[string]taskorch.ChannelProvider, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	out := map[string]taskorch.ChannelProvider{}
	var errs error
	add := func(channel string, p taskorch.ChannelProvider, err error) {
		if err != nil {
			errs = errors.Join(errs, err)
			return
		}
		out[channel] = p
	}
	outbox := func(channel string) {
		if db == nil {
			errs = errors.Join(errs, fmt.Errorf("the %s channel's outbox provider needs a database", channel))
			return
		}
		p, err := NewOutbox(db, channel)
		add(channel, p, err)
	}
	switch c.EmailProvider {
	case "outbox":
		outbox(taskorch.TypeEmail)
	case "smtp":
		p, err := NewSMTP(SMTPConfig{URL: c.SMTPURL, From: c.EmailFrom, Timeout: c.Timeout})
		add(taskorch.TypeEmail, p, err)
	case "resend":
		p, err := NewResend(ResendConfig{APIKey: c.ResendAPIKey, BaseURL: c.ResendBaseURL, From: c.EmailFrom, Timeout: c.Timeout})
		add(taskorch.TypeEmail, p, err)
	}
	switch c.SMSProvider {
	case "outbox":
		outbox(taskorch.TypeSMS)
	case "twilio":
		p, err := NewTwilio(TwilioConfig{AccountSID: c.TwilioAccountSID, AuthToken: c.TwilioAuthToken, From: c.TwilioFrom,
			BaseURL: c.TwilioBaseURL, Timeout: c.Timeout})
		add(taskorch.TypeSMS, p, err)
	}
	switch c.FilesSigner {
	case "outbox":
		outbox(taskorch.TypeFileDelete)
	case "http":
		p, err := NewHTTPSigner(HTTPSignerConfig{URL: c.FilesSignerURL, Token: c.FilesSignerToken, Timeout: c.Timeout})
		add(taskorch.TypeFileDelete, p, err)
	case "s3":
		p, err := NewS3Signer(S3SignerConfig{Endpoint: c.S3Endpoint, Region: c.S3Region, AccessKeyID: c.S3AccessKeyID,
			SecretAccessKey: c.S3SecretAccessKey, Timeout: c.Timeout})
		add(taskorch.TypeFileDelete, p, err)
	}
	if errs != nil {
		return nil, errs
	}
	return out, nil
}

// secret shows whether a secret is set, never its value.
func secret(v string) string {
	if v == "" {
		return ""
	}
	return "[REDACTED]"
}

// redactedSMTPURL shows the SMTP URL without its password (or nothing, if it does not parse).
func (c Config) redactedSMTPURL() string {
	if c.SMTPURL == "" {
		return ""
	}
	s, err := ParseSMTPURL(c.SMTPURL)
	if err != nil {
		return "[REDACTED: unparseable]"
	}
	return s.redacted()
}

// LogValue logs the configuration with secrets hidden.
func (c Config) LogValue() slog.Value {
	var attrs []slog.Attr
	addIf := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	addIf("email_provider", c.EmailProvider)
	addIf("email_from", c.EmailFrom)
	addIf("smtp_url", c.redactedSMTPURL())
	addIf("resend_api_key", secret(c.ResendAPIKey))
	addIf("resend_base_url", c.ResendBaseURL)
	addIf("sms_provider", c.SMSProvider)
	addIf("twilio_account_sid", c.TwilioAccountSID)
	addIf("twilio_auth_token", secret(c.TwilioAuthToken))
	addIf("twilio_from", c.TwilioFrom)
	addIf("twilio_base_url", c.TwilioBaseURL)
	addIf("files_signer", c.FilesSigner)
	addIf("files_signer_url", c.FilesSignerURL)
	addIf("files_signer_token", secret(c.FilesSignerToken))
	addIf("s3_endpoint", c.S3Endpoint)
	addIf("s3_region", c.S3Region)
	addIf("s3_access_key_id", c.S3AccessKeyID)
	addIf("s3_secret_access_key", secret(c.S3SecretAccessKey))
	if c.Timeout != 0 {
		attrs = append(attrs, slog.Duration("timeout", c.Timeout))
	}
	return slog.GroupValue(attrs...)
}

// String formats the configuration with secrets hidden, as key=value pairs.
func (c Config) String() string {
	attrs := c.LogValue().Group()
	parts := make([]string, 0, len(attrs))
	for _, a := range attrs {
		parts = append(parts, a.Key+"="+a.Value.String())
	}
	return "providers.Config{" + strings.Join(parts, " ") + "}"
}

// GoString is String, so %#v hides secrets too.
func (c Config) GoString() string { return c.String() }
