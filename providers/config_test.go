package providers_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
	"github.com/taskorch/taskorch/providers"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func channelNames(m map[string]taskorch.ChannelProvider) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestConfigNothingChosen(t *testing.T) {
	t.Parallel()
	c, err := providers.ConfigFromEnv(env(nil))
	require.NoError(t, err)
	require.Equal(t, providers.Config{}, c)
	chans, err := c.Channels(nil)
	require.NoError(t, err)
	require.Empty(t, chans, "a channel without a provider is absent; the worker fails its tasks clearly")
}

func TestConfigBuildsEachProvider(t *testing.T) {
	t.Parallel()
	c, err := providers.ConfigFromEnv(env(map[string]string{
		"TASKORCH_EMAIL_PROVIDER":       "Resend",
		"TASKORCH_RESEND_API_KEY":       "re_abc",
		"TASKORCH_EMAIL_FROM":           "noreply@example.com",
		"TASKORCH_SMS_PROVIDER":         "twilio",
		"TASKORCH_TWILIO_ACCOUNT_SID":   "AC123",
		"TASKORCH_TWILIO_AUTH_TOKEN":    "tok123",
		"TASKORCH_TWILIO_FROM":          "+15550001111",
		"TASKORCH_FILES_SIGNER":         "s3",
		"TASKORCH_S3_ENDPOINT":          "http://127.0.0.1:7070",
		"TASKORCH_S3_ACCESS_KEY_ID":     "AKID",
		"TASKORCH_S3_SECRET_ACCESS_KEY": "sekret",
		"TASKORCH_PROVIDER_TIMEOUT":     "15s",
	}))
	require.NoError(t, err)
	require.Equal(t, "resend", c.EmailProvider)
	require.Equal(t, 15*time.Second, c.Timeout)
	chans, err := c.Channels(nil)
	require.NoError(t, err)
	require.Equal(t, []string{"email", "file_delete", "sms"}, channelNames(chans))
	require.IsType(t, &providers.Resend{}, chans["email"])
	require.IsType(t, &providers.Twilio{}, chans["sms"])
	require.IsType(t, &providers.S3Signer{}, chans["file_delete"])

	c, err = providers.ConfigFromEnv(env(map[string]string{
		"TASKORCH_EMAIL_PROVIDER":   "smtp",
		"TASKORCH_SMTP_URL":         "smtp://u:p@mail.example.com",
		"TASKORCH_EMAIL_FROM":       "noreply@example.com",
		"TASKORCH_FILES_SIGNER":     "http",
		"TASKORCH_FILES_SIGNER_URL": "https://files.internal/sign",
	}))
	require.NoError(t, err)
	chans, err = c.Channels(nil)
	require.NoError(t, err)
	require.Equal(t, []string{"email", "file_delete"}, channelNames(chans))
	require.IsType(t, &providers.SMTP{}, chans["email"])
	require.IsType(t, &providers.HTTPSigner{}, chans["file_delete"])
}

func TestConfigOutbox(t *testing.T) {
	t.Parallel()
	c, err := providers.ConfigFromEnv(env(map[string]string{
		"TASKORCH_EMAIL_PROVIDER": "outbox", "TASKORCH_SMS_PROVIDER": "outbox", "TASKORCH_FILES_SIGNER": "outbox",
	}))
	require.NoError(t, err)
	_, err = c.Channels(nil)
	require.ErrorContains(t, err, "the email channel's outbox provider needs a database")
	chans, err := c.Channels(dbtest.Tx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"email", "file_delete", "sms"}, channelNames(chans))
	for _, p := range chans {
		require.IsType(t, &providers.Outbox{}, p)
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	_, err := providers.ConfigFromEnv(env(map[string]string{
		"TASKORCH_EMAIL_PROVIDER":   "sendgrid",
		"TASKORCH_SMS_PROVIDER":     "sns",
		"TASKORCH_FILES_SIGNER":     "gcs",
		"TASKORCH_PROVIDER_TIMEOUT": "ten",
	}))
	require.ErrorContains(t, err, `TASKORCH_EMAIL_PROVIDER="sendgrid": want outbox, smtp, resend`)
	require.ErrorContains(t, err, `TASKORCH_SMS_PROVIDER="sns": want outbox, twilio`)
	require.ErrorContains(t, err, `TASKORCH_FILES_SIGNER="gcs": want http, s3, outbox`)
	require.ErrorContains(t, err, `TASKORCH_PROVIDER_TIMEOUT="ten"`)

	for _, tt := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"TASKORCH_EMAIL_PROVIDER": "resend"}, []string{"TASKORCH_EMAIL_PROVIDER=resend needs TASKORCH_RESEND_API_KEY"}},
		{map[string]string{"TASKORCH_EMAIL_PROVIDER": "smtp"}, []string{"TASKORCH_EMAIL_PROVIDER=smtp needs TASKORCH_SMTP_URL"}},
		{map[string]string{"TASKORCH_EMAIL_PROVIDER": "smtp", "TASKORCH_SMTP_URL": "smtp://u:hunter2@h?tls=1"}, []string{`TASKORCH_SMTP_URL: unknown parameter "tls"`}},
		{map[string]string{"TASKORCH_SMS_PROVIDER": "twilio"}, []string{
			"TASKORCH_SMS_PROVIDER=twilio needs TASKORCH_TWILIO_ACCOUNT_SID", "TASKORCH_SMS_PROVIDER=twilio needs TASKORCH_TWILIO_AUTH_TOKEN",
			"TASKORCH_SMS_PROVIDER=twilio needs TASKORCH_TWILIO_FROM"}},
		{map[string]string{"TASKORCH_EMAIL_PROVIDER": "resend", "TASKORCH_RESEND_API_KEY": "re_x"}, []string{"TASKORCH_EMAIL_PROVIDER=resend needs TASKORCH_EMAIL_FROM"}},
		{map[string]string{"TASKORCH_EMAIL_PROVIDER": "smtp", "TASKORCH_SMTP_URL": "smtp://u:hunter2@h"}, []string{"TASKORCH_EMAIL_PROVIDER=smtp needs TASKORCH_EMAIL_FROM"}},
		{map[string]string{"TASKORCH_FILES_SIGNER": "http"}, []string{"TASKORCH_FILES_SIGNER=http needs TASKORCH_FILES_SIGNER_URL"}},
		{map[string]string{"TASKORCH_FILES_SIGNER": "s3", "TASKORCH_S3_ACCESS_KEY_ID": "AKID"}, []string{"TASKORCH_FILES_SIGNER=s3 needs TASKORCH_S3_SECRET_ACCESS_KEY"}},
		{map[string]string{"TASKORCH_FILES_SIGNER": "s3", "TASKORCH_S3_ACCESS_KEY_ID": "AKID", "TASKORCH_S3_SECRET_ACCESS_KEY": "x",
			"TASKORCH_S3_ENDPOINT": "127.0.0.1:7070"}, []string{"TASKORCH_S3_ENDPOINT"}},
	} {
		c, err := providers.ConfigFromEnv(env(tt.env))
		require.NoError(t, err)
		_, err = c.Channels(nil)
		for _, w := range tt.want {
			require.ErrorContains(t, err, w)
		}
		require.NotContains(t, err.Error(), "hunter2")
	}
}

func TestConfigHidesSecrets(t *testing.T) {
	t.Parallel()
	secrets := []string{"re_live_SECRET1", "hunter2PASS", "TwilioTOKEN3", "signerTOKEN4", "s3SECRET5"}
	c, err := providers.ConfigFromEnv(env(map[string]string{
		"TASKORCH_EMAIL_PROVIDER":       "smtp",
		"TASKORCH_SMTP_URL":             "smtp://mailer:hunter2PASS@mail.example.com:587?starttls=required",
		"TASKORCH_RESEND_API_KEY":       "re_live_SECRET1",
		"TASKORCH_SMS_PROVIDER":         "twilio",
		"TASKORCH_TWILIO_ACCOUNT_SID":   "AC123",
		"TASKORCH_TWILIO_AUTH_TOKEN":    "TwilioTOKEN3",
		"TASKORCH_FILES_SIGNER":         "http",
		"TASKORCH_FILES_SIGNER_URL":     "https://files.internal/sign",
		"TASKORCH_FILES_SIGNER_TOKEN":   "signerTOKEN4",
		"TASKORCH_S3_SECRET_ACCESS_KEY": "s3SECRET5",
	}))
	require.NoError(t, err)

	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("providers", "config", c)
	var text bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("providers", "config", c)
	for _, out := range []string{c.String(), fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), logged.String(), text.String()} {
		for _, s := range secrets {
			require.NotContains(t, out, s)
		}
	}
	require.Contains(t, c.String(), "smtp_url=smtp://mailer:[REDACTED]@mail.example.com:587")
	require.Contains(t, c.String(), "twilio_auth_token=[REDACTED]")
	require.Contains(t, logged.String(), `"email_provider":"smtp"`)
	require.Contains(t, logged.String(), `"files_signer_token":"[REDACTED]"`)
}
