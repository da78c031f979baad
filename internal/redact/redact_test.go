package redact_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/redact"
)

func TestIsSecretKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{
		"password", "Password", "DB_PASSWORD", "passwd", "passphrase", "pwd", "db_pwd", "dbPwd", "PWD", "pass", "smtp.pass",
		"secret", "client_secret", "clientSecret", "secret_key", "SecretAccessKey",
		"token", "access_token", "refreshToken", "X-Auth-Token",
		"api_key", "apiKey", "API-KEY", "apikey", "X-Api-Key", "x_api_key", "x-api-key",
		"authorization", "Authorization", "Proxy-Authorization", "auth", "basicAuth", "auth_header",
		"credentials", "aws_credentials", "private_key", "privateKey", "access_key", "AccessKeyId",
		"cookie", "Set-Cookie", "session", "sessionId", "signature", "X-Amz-Signature", "sig", "jwt",
	} {
		require.True(t, redact.IsSecretKey(k), "%q names a secret", k)
	}
	for _, k := range []string{
		"", "author", "authors", "passenger", "bypass", "compass", "signal", "design", "user", "email",
		"to", "subject", "key", "tenant", "description", "keyboard", "db_function", "attempt", "provider",
	} {
		require.False(t, redact.IsSecretKey(k), "%q names no secret", k)
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":             "",
		"nothing here": "nothing here",
		// URL passwords, whatever the scheme; a password may hold a raw @.
		"dial postgres://app:s3cret@db:5432/x failed":           "dial postgres://app:xxxxx@db:5432/x failed",
		"handler: connect postgres://u:hunter2pw@db/x: refused": "handler: connect postgres://u:xxxxx@db/x: refused",
		"a postgresql://u:p%40w@h/db and redis://:pw2@r:6379/0": "a postgresql://u:xxxxx@h/db and redis://:xxxxx@r:6379/0",
		"cannot parse `postgres://u:p@ss@h:5432/db`: x":         "cannot parse `postgres://u:xxxxx@h:5432/db`: x",
		`{"dsn":"SMTPS://mailer:pw@smtp.example.com:465"}`:      `{"dsn":"SMTPS://mailer:xxxxx@smtp.example.com:465"}`,
		"nothing to hide: https://example.com/a@b":              "nothing to hide: https://example.com/a@b",
		"nor here: https://api.example.com:443?email=a@b.com":   "nor here: https://api.example.com:443?email=a@b.com",
		"mailto:someone@example.com and user@host:22":           "mailto:someone@example.com and user@host:22",
		"postgres://u@h/db has no password":                     "postgres://u@h/db has no password",
		// key=value and key: value pairs whose key names a secret, quoted or not.
		"host=db password=s3cret user=app":              "host=db password=xxxxx user=app",
		`(host=h password='p w\'s')`:                    `(host=h password='xxxxx')`,
		`{"token": "abc"} api_key=zzz; Secret: 'q w'`:   `{"token": "xxxxx"} api_key=xxxxx; Secret: 'xxxxx'`,
		"X-Api-Key: abc123\r\nAccept: */*":              "X-Api-Key: xxxxx\r\nAccept: */*",
		"Authorization: Bearer eyJhbGciOi.eyJzdWIi.sig": "Authorization: Bearer xxxxx",
		"authorization=Basic dTpw, next":                "authorization=Basic xxxxx, next",
		"GET /callback?token=abc&next=/x":               "GET /callback?token=xxxxx&next=/x",
		`payload {\"pwd\":\"hunter2\",\"n\":1}`:         `payload {\"pwd\":\"xxxxx\",\"n\":1}`,
		`PWD="a \"quoted\" one" rest`:                   `PWD="xxxxx" rest`,
		`unterminated password="abc def`:                `unterminated password="xxxxx`,
		// Prose that only mentions a secret's name is left alone.
		`password authentication failed for user "app"`: `password authentication failed for user "app"`,
		"author: Jane; password=":                       "author: Jane; password=",
		"time 12:30:45, ratio 3:1":                      "time 12:30:45, ratio 3:1",
	} {
		require.Equal(t, want, redact.String(in), "%q", in)
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		// Secret keys at any depth, any case, whatever the value's type; null, true and false stay.
		`{"a":{"X-Api-Key":"k","list":[{"pwd":"p"},{"dsn":"postgres://u:pw@h/db"}]},"password":{"n":"x"},"Api_Key":["a"],` +
			`"pin_password":1234,"token":null,"session":true,"n":12345678901234567890,"s":"<b>&"}`: `{"a":{"X-Api-Key":"xxxxx","list":[{"pwd":"xxxxx"},{"dsn":"postgres://u:xxxxx@h/db"}]},"password":"xxxxx","Api_Key":"xxxxx",` +
			`"pin_password":"xxxxx","token":null,"session":true,"n":12345678901234567890,"s":"<b>&"}`,
		`{"headers": {"Authorization": "Bearer abc", "Content-Type": "application/json"}}`: `{"headers":{"Authorization":"xxxxx","Content-Type":"application/json"}}`,
		`{"note": "connect with password=hunter2"}`:                                        `{"note":"connect with password=xxxxx"}`,
		`"postgres://u:pw@h"`:             `"postgres://u:xxxxx@h"`,
		`[{"secret":"a"},{"SECRET":"b"}]`: `[{"secret":"xxxxx"},{"SECRET":"xxxxx"}]`,
		// Nothing to mask: the document as it was, spacing included.
		`{"note": "<b>not html</b>", "n": 1.50}`: `{"note": "<b>not html</b>", "n": 1.50}`,
		`{}`:                                     `{}`,
		"":                                       "",
		// Not one JSON document: masked as text.
		`password=x oops`:              `password=xxxxx oops`,
		`{"a":1} {"password":"x"}`:     `{"a":1} {"password":"xxxxx"}`,
		`{"password": "x", "broken": `: `{"password": "xxxxx", "broken": `,
	} {
		got := string(redact.JSON([]byte(in)))
		require.Equal(t, want, got, "%s", in)
		if json.Valid([]byte(in)) {
			require.True(t, json.Valid([]byte(got)), "valid JSON stays valid: %s", got)
		}
	}
}
