package dashboard

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/redact"
)

func joinTokens(ts []jsonToken) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Text)
	}
	return b.String()
}

func TestPrettyJSONKeepsOrderAndMasksSecrets(t *testing.T) {
	t.Parallel()
	got := joinTokens(prettyJSON([]byte(`{"z":1,"a":{"API_Key":"sk_1","list":[true,null,"<b>"]},"password":{"nested":"x"},"e":[]}`)))
	require.Equal(t, `{
  "z": 1,
  "a": {
    "API_Key": "xxxxx",
    "list": [
      true,
      null,
      "<b>"
    ]
  },
  "password": "xxxxx",
  "e": []
}`, got)
	require.Equal(t, `{"z":1,"a":{"API_Key":"xxxxx","list":[true,null,"<b>"]},"password":"xxxxx","e":[]}`,
		compactJSON(200, []byte(`{"z":1,"a":{"API_Key":"sk_1","list":[true,null,"<b>"]},"password":{"nested":"x"},"e":[]}`)))
	require.Equal(t, `{"a":1…`, compactJSON(6, []byte(`{"a":12345}`)))
	// Not JSON: shown as text (the template escapes it).
	require.Equal(t, "<not json", joinTokens(prettyJSON([]byte("<not json"))))
	require.Equal(t, "12345678901234567890", joinTokens(prettyJSON([]byte("12345678901234567890"))), "numbers keep their digits")
}

// The payload views mask exactly what redact.JSON masks: one rule for the dashboard, the
// command line and the logs.
func TestPayloadViewMasksAsRedactJSON(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{"a":{"X-Api-Key":"k","list":[{"pwd":"p"},{"dsn":"postgres://u:pw@h/db"}]},"password":{"n":"x"},"token":null,"session":true}`,
		`{"note":"connect with password=hunter2","Authorization":"Bearer abc","n":12345678901234567890,"s":"<b>"}`,
		`["postgres://u:pw@h/db",{"Client_Secret":["a",{"b":1}]},{"author":"Jane"}]`,
		`{"clean":"nothing to hide","n":1.50}`,
		`not json: password=hunter2`,
	} {
		want := redact.JSON([]byte(doc))
		if json.Valid(want) {
			var b bytes.Buffer
			require.NoError(t, json.Compact(&b, want))
			want = b.Bytes()
		}
		require.Equal(t, string(want), compactJSON(1<<20, []byte(doc)), doc)
		pretty := []byte(joinTokens(prettyJSON([]byte(doc))))
		if json.Valid(pretty) {
			var b bytes.Buffer
			require.NoError(t, json.Compact(&b, pretty))
			pretty = b.Bytes()
		}
		require.Equal(t, string(want), string(pretty), doc)
	}
}

func TestRedactText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"dial postgres://app:s3cret@db:5432/x failed": "dial postgres://app:xxxxx@db:5432/x failed",
		"host=db password=s3cret user=app":            "host=db password=xxxxx user=app",
		`{"token": "abc"} api_key=zzz; Secret: 'q w'`: `{"token": "xxxxx"} api_key=xxxxx; Secret: 'xxxxx'`,
		"nothing to hide: https://example.com/a@b":    "nothing to hide: https://example.com/a@b",
	} {
		require.Equal(t, want, redactText(in), in)
	}
}

func TestChartsAndDurations(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]int64{0: 2, 1: 2, 3: 5, 7: 10, 11: 20, 99: 100, 101: 200, 4999: 5000} {
		require.Equal(t, want, niceCeil(in), in)
	}
	c := newBarChart("x", "bars-ok", time.Unix(0, 0), time.Minute, []int64{0, 5, 10})
	require.Len(t, c.Bars, 3)
	require.Equal(t, int64(15), c.Total)
	require.InDelta(t, c.Plot.Bottom, c.Bars[0].Y, 1e-9, "an empty bucket has no height")
	require.InDelta(t, c.Plot.Y, c.Bars[2].Y, 1e-9, "the largest reaches the top")
	require.Equal(t, []string{"0", "5", "10"}, []string{c.YTicks[0].Label, c.YTicks[1].Label, c.YTicks[2].Label})
	require.Equal(t, "1,234,567", formatInt(int64(1234567)))
	require.Equal(t, "3m 12s", shortDuration(192*time.Second))
	require.Equal(t, "2d 4h", shortDuration(52*time.Hour))
	require.Equal(t, "1.2k", compactInt(1200))
}
