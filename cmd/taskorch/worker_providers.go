package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/providers"
)

// providerFlagDefs are the channel providers' flags, each the twin of a TASKORCH_* variable
// that providers.ConfigFromEnv reads (docs/configuration.md, "Channel providers").
var providerFlagDefs = []struct{ env, flag, usage string }{
	{providers.EnvEmailProvider, "email-provider", "the email channel's provider: outbox, smtp or resend; empty: this worker claims no email task"},
	{providers.EnvEmailFrom, "email-from", "the sender of emails whose request has no from"},
	{providers.EnvSMTPURL, "smtp-url", "smtp://user:pass@host:587?starttls=required or smtps://... (secret: prefer the variable)"},
	{providers.EnvResendAPIKey, "resend-api-key", "Resend API key (secret: prefer the variable)"},
	{providers.EnvResendBaseURL, "resend-base-url", "Resend API URL (default https://api.resend.com)"},
	{providers.EnvSMSProvider, "sms-provider", "the sms channel's provider: outbox or twilio; empty: this worker claims no sms task"},
	{providers.EnvTwilioAccountSID, "twilio-account-sid", "Twilio account SID (AC...)"},
	{providers.EnvTwilioAuthToken, "twilio-auth-token", "Twilio auth token (secret: prefer the variable)"},
	{providers.EnvTwilioFrom, "twilio-from", "the sender of SMS whose request has no from: a number or a Messaging Service SID"},
	{providers.EnvTwilioBaseURL, "twilio-base-url", "Twilio API URL (default Twilio's hosts)"},
	{providers.EnvFilesSigner, "files-signer", "the file_delete channel's signer: http, s3 or outbox; empty: this worker claims no file_delete task"},
	{providers.EnvFilesSignerURL, "files-signer-url", "the files service's signing endpoint (files-signer=http)"},
	{providers.EnvFilesSignerToken, "files-signer-token", "bearer token for the files service (secret: prefer the variable)"},
	{providers.EnvS3Endpoint, "s3-endpoint", "S3-compatible endpoint URL (files-signer=s3; default AWS)"},
	{providers.EnvS3Region, "s3-region", "S3 region (default us-east-1)"},
	{providers.EnvS3AccessKeyID, "s3-access-key-id", "S3 access key id"},
	{providers.EnvS3SecretAccessKey, "s3-secret-access-key", "S3 secret access key (secret: prefer the variable)"},
	{providers.EnvProviderTimeout, "provider-timeout", "bound on one provider call, a Go duration (default 30s)"},
}

// providerFlags holds the providers' flags. Their defaults are empty, not the variables'
// values, so --help never shows a secret; an unset flag falls back to its variable.
type providerFlags struct {
	fs     *pflag.FlagSet
	values map[string]*string // by variable name
	flags  map[string]string  // flag name by variable name
}

func addProviderFlags(fs *pflag.FlagSet) *providerFlags {
	p := &providerFlags{fs: fs, values: map[string]*string{}, flags: map[string]string{}}
	for _, d := range providerFlagDefs {
		v := new(string)
		fs.StringVar(v, d.flag, "", fmt.Sprintf("%s (env %s)", d.usage, d.env))
		p.values[d.env], p.flags[d.env] = v, d.flag
	}
	return p
}

// lookup reads one variable the way config does: a flag given on the command line wins.
func (p *providerFlags) lookup(name string) string {
	if p == nil {
		return os.Getenv(name)
	}
	if flag, ok := p.flags[name]; ok && p.fs.Changed(flag) {
		return *p.values[name]
	}
	return os.Getenv(name)
}

// config reads the providers' configuration: a flag given on the command line wins over its
// variable.
func (p *providerFlags) config() (providers.Config, error) {
	return providers.ConfigFromEnv(p.lookup)
}

// check reports every chosen provider whose settings are missing or malformed, naming the
// variables, without a database or a network: the worker calls it before it connects. A
// configuration error is a usage error (exit 2).
func (p *providerFlags) check() error {
	if p == nil {
		return nil
	}
	cfg, err := p.config()
	if err != nil {
		return &usageError{err: err}
	}
	if err := checkProviders(cfg); err != nil {
		return &usageError{err: fmt.Errorf("channel providers: %w", err)}
	}
	return nil
}

// checkProviders builds the providers cfg chooses, but the outbox ones (which need only the
// database), so that a missing setting and a malformed one (a Twilio SID, an S3 endpoint) are
// both found; building one connects to nothing.
func checkProviders(cfg providers.Config) error {
	for _, choice := range []*string{&cfg.EmailProvider, &cfg.SMSProvider, &cfg.FilesSigner} {
		if *choice == "outbox" {
			*choice = ""
		}
	}
	_, err := cfg.Channels(nil)
	return err
}

// channels builds the worker's channel providers (the outbox ones write through pool) and logs
// which are configured, secrets hidden. A configuration error is a usage error (exit 2).
func (p *providerFlags) channels(pool *pgxpool.Pool, log *slog.Logger) (map[string]taskorch.ChannelProvider, error) {
	if p == nil {
		return nil, nil
	}
	cfg, err := p.config()
	if err != nil {
		return nil, &usageError{err: err}
	}
	chans, err := cfg.Channels(pool)
	if err != nil {
		return nil, &usageError{err: fmt.Errorf("channel providers: %w", err)}
	}
	var missing []string
	for _, t := range taskorch.ChannelTypes {
		if _, ok := chans[t]; !ok {
			missing = append(missing, t)
		}
	}
	slices.Sort(missing)
	log.Info("channel providers", "config", cfg, "without_provider", missing)
	return chans, nil
}
