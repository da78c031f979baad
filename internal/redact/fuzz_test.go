package redact_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/redact"
)

// FuzzJSON: masking never breaks a valid document, never lets a secret key's string value
// through, and never panics on anything.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"password":"hunter2","a":[1,{"X-Api-Key":"k"}],"u":"postgres://u:pw@h/db"}`,
		`{"token":null,"n":1e400,"s":"\u003c"}`, `[]`, `"password=x"`, `{"a":`, `password: 'x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := redact.JSON(in)
		_ = redact.String(string(in))
		if !json.Valid(in) {
			return
		}
		require.True(t, json.Valid(out), "in %s out %s", in, out)
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					if redact.IsSecretKey(k) {
						if _, isStr := e.(string); isStr {
							require.Equal(t, redact.Mask, e, "key %q in %s", k, out)
						}
						continue
					}
					walk(e)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		var doc any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&doc))
		walk(doc)
	})
}
