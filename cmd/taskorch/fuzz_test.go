package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
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

// Numbers at the edges of PostgreSQL's numeric: parsePayload accepts exactly what jsonb
// stores, and refuses the rest as a usage error naming the number.
func TestParsePayloadNumberRange(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewDB(t)
	for _, n := range []string{
		"0E1234567890", "0E1073741822", "0E1073741823", "-0e-1073741823", "1e131071", "1e131072", "9.9e131071",
		"0.1e131073", "0.1e131072", "0.001e131074", "1e-16383", "1e-16384", "0.0e-16383", "0e-16384", "1.5e-16382",
		"12e-16384", "0.00001e5", "1E+5", "1e99999999999999999999", "-1e131071", "123.456",
	} {
		payload := `{"n": ` + n + `}`
		var pgErr error
		var ignored string
		pgErr = pool.QueryRow(context.Background(), `select ($1::text::jsonb)::text`, payload).Scan(&ignored)
		_, err := parsePayload(payload)
		if pgErr == nil {
			require.NoError(t, err, "%s: PostgreSQL stores it", n)
			continue
		}
		var u *usageError
		require.ErrorAs(t, err, &u, "%s: PostgreSQL refuses it (%v)", n, pgErr)
		require.ErrorContains(t, err, "which PostgreSQL cannot store in jsonb")
	}
}
