package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch/internal/dbtest"
)

// FuzzParsePayload: the CLI's PAYLOAD parsing never panics; what it refuses is a usage error
// (exit 2); what it accepts is a JSON object that PostgreSQL stores as jsonb. The committed
// corpus is in testdata/fuzz/FuzzParsePayload.
func FuzzParsePayload(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"account_id": 7}`, `{"a": [1, 2.5e300, "x", null, true]}`, `[1]`, `"s"`, `{"a":`,
		`{"a": 1} {"b": 2}`, `{"s": "\u0000"}`, `{"s": "\ud800"}`, `{"\u00e9": "caf\u00e9"}`,
		`{"n": 123456789012345678901234567890}`, "{\"s\": \"\xff\"}", `{"html": "<script>alert(1)</script>"}`,
	} {
		f.Add(s)
	}
	pool := dbtest.NewDB(f)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePayload(s)
		if err != nil {
			var u *usageError
			if !errors.As(err, &u) {
				t.Fatalf("refusal is not a usage error: %v", err)
			}
			return
		}
		if !utf8.Valid(p) || !json.Valid(p) {
			t.Fatalf("accepted %q as %q, which is not valid UTF-8 JSON", s, p)
		}
		checkJSONB(t, pool, p)
	})
}

func checkJSONB(t *testing.T, pool *pgxpool.Pool, p []byte) {
	t.Helper()
	var kind string
	if err := pool.QueryRow(context.Background(), `select jsonb_typeof($1::text::jsonb)`, string(p)).Scan(&kind); err != nil {
		t.Fatalf("accepted %q, which PostgreSQL refuses: %v", p, err)
	}
	if kind != "object" {
		t.Fatalf("accepted %q, which is a %s", p, kind)
	}
}
