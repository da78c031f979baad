package envelope_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/envelope"
)

func ptr(b bool) *bool { return &b }

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		in      string
		want    envelope.Result
		outcome string
	}{
		{
			name:    "status shape: success",
			in:      `{"status": "succeeded", "payload": {"to": "a@example.com"}}`,
			want:    envelope.Result{Succeeded: true, Status: "succeeded", Payload: []byte(`{"to": "a@example.com"}`)},
			outcome: "succeeded",
		},
		{
			name:    "status shape: named non-success",
			in:      `{"status": "max_attempts_reached"}`,
			want:    envelope.Result{Status: "max_attempts_reached"},
			outcome: `status "max_attempts_reached"`,
		},
		{
			name:    "named non-success with an error",
			in:      `{"status": "stuck", "error": "file 9 will not delete"}`,
			want:    envelope.Result{Status: "stuck", Error: "file 9 will not delete"},
			outcome: `status "stuck": file 9 will not delete`,
		},
		{
			name:    "status is case-sensitive",
			in:      `{"status": "Succeeded"}`,
			want:    envelope.Result{Status: "Succeeded"},
			outcome: `status "Succeeded"`,
		},
		{
			name:    "success shape: success with payload",
			in:      `{"success": true, "error": "", "validation_failure_message": "", "payload": [1, 2]}`,
			want:    envelope.Result{Succeeded: true, Success: ptr(true), Payload: []byte(`[1, 2]`)},
			outcome: "succeeded",
		},
		{
			name:    "success shape: operational error",
			in:      `{"success": false, "error": "provider timed out"}`,
			want:    envelope.Result{Success: ptr(false), Error: "provider timed out"},
			outcome: "error: provider timed out",
		},
		{
			name:    "success shape: failure without a reason",
			in:      `{"success": false}`,
			want:    envelope.Result{Success: ptr(false)},
			outcome: "success false",
		},
		{
			name:    "success shape: validation failure",
			in:      `{"success": false, "validation_failure_message": "no such account"}`,
			want:    envelope.Result{Success: ptr(false), ValidationFailureMessage: "no such account"},
			outcome: "validation failure: no such account",
		},
		{
			name:    "validation message beats success true",
			in:      `{"success": true, "validation_failure_message": "address is empty"}`,
			want:    envelope.Result{Success: ptr(true), ValidationFailureMessage: "address is empty"},
			outcome: "validation failure: address is empty",
		},
		{
			name:    "validation message beats status succeeded",
			in:      `{"status": "succeeded", "validation_failure_message": "x"}`,
			want:    envelope.Result{Status: "succeeded", ValidationFailureMessage: "x"},
			outcome: "validation failure: x",
		},
		{
			name:    "validation message alone",
			in:      `{"validation_failure_message": "bad input"}`,
			want:    envelope.Result{ValidationFailureMessage: "bad input"},
			outcome: "validation failure: bad input",
		},
		{
			name:    "error alone",
			in:      `{"error": "boom"}`,
			want:    envelope.Result{Error: "boom"},
			outcome: "error: boom",
		},
		{
			name:    "status decides over success",
			in:      `{"status": "waiting", "success": true}`,
			want:    envelope.Result{Status: "waiting", Success: ptr(true)},
			outcome: `status "waiting"`,
		},
		{
			name:    "status succeeded over success false",
			in:      `{"status": "succeeded", "success": false}`,
			want:    envelope.Result{Succeeded: true, Status: "succeeded", Success: ptr(false)},
			outcome: "succeeded",
		},
		{
			name:    "empty status falls back to success",
			in:      `{"status": "", "success": true}`,
			want:    envelope.Result{Succeeded: true, Success: ptr(true)},
			outcome: "succeeded",
		},
		{
			name:    "null fields are absent",
			in:      `{"status": null, "success": true, "error": null, "validation_failure_message": null, "payload": null}`,
			want:    envelope.Result{Succeeded: true, Success: ptr(true)},
			outcome: "succeeded",
		},
		{
			name:    "an error does not undo a success",
			in:      `{"success": true, "error": "warning: slow"}`,
			want:    envelope.Result{Succeeded: true, Success: ptr(true), Error: "warning: slow"},
			outcome: "succeeded",
		},
		{
			name:    "unknown fields and other-case keys are ignored",
			in:      ` {"status": "succeeded", "Success": "yes", "STATUS": 5, "extra": {"deep": [1]}} `,
			want:    envelope.Result{Succeeded: true, Status: "succeeded"},
			outcome: "succeeded",
		},
		{
			name:    "scalar payload",
			in:      `{"status": "succeeded", "payload": "text"}`,
			want:    envelope.Result{Succeeded: true, Status: "succeeded", Payload: []byte(`"text"`)},
			outcome: "succeeded",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := envelope.Parse([]byte(tt.in))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.outcome, got.Outcome())
		})
	}
}

func TestParseMalformed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		in   string
		msg  string
	}{
		{"nil", "", "empty"},
		{"blank", " \n\t", "empty"},
		{"null", "null", "expected a JSON object, got null"},
		{"array", `[{"status": "succeeded"}]`, "expected a JSON object, got an array"},
		{"string", `"succeeded"`, "expected a JSON object, got a string"},
		{"number", `42`, "expected a JSON object, got a number"},
		{"boolean", `true`, "expected a JSON object, got a boolean"},
		{"not JSON", `status=succeeded`, "not valid JSON"},
		{"truncated", `{"status": "succ`, "not valid JSON"},
		{"trailing garbage", `{"status": "succeeded"} x`, "not valid JSON"},
		{"two objects", `{"status": "succeeded"}{}`, "not valid JSON"},
		{"status a number", `{"status": 5}`, `"status" must be a string, got a number`},
		{"status an object", `{"status": {"v": "succeeded"}}`, `"status" must be a string, got an object`},
		{"success a string", `{"success": "yes"}`, `"success" must be a boolean, got a string`},
		{"success a number", `{"success": 1}`, `"success" must be a boolean, got a number`},
		{"error an object", `{"success": false, "error": {"code": 1}}`, `"error" must be a string, got an object`},
		{"validation message an array", `{"success": false, "validation_failure_message": ["x"]}`,
			`"validation_failure_message" must be a string, got an array`},
		{"empty object", `{}`, "no outcome"},
		{"payload only", `{"payload": {"a": 1}}`, "no outcome"},
		{"all empty", `{"status": "", "error": "", "validation_failure_message": ""}`, "no outcome"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := envelope.Parse([]byte(tt.in))
			require.ErrorIs(t, err, envelope.ErrMalformed)
			require.ErrorContains(t, err, tt.msg)
		})
	}
}

// Status, Error and ValidationFailureMessage are cut to MaxTextLen bytes, never inside a
// UTF-8 character; the decision is made on the whole value.
func TestParseTruncates(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", envelope.MaxTextLen) // 2 bytes each: twice the limit
	in := `{"success": false, "status": "` + long + `", "error": "` + long + `", "validation_failure_message": "` + long + `"}`
	got, err := envelope.Parse([]byte(in))
	require.NoError(t, err)
	require.False(t, got.Succeeded)
	for _, s := range []string{got.Status, got.Error, got.ValidationFailureMessage} {
		require.Len(t, s, envelope.MaxTextLen)
		require.True(t, utf8.ValidString(s))
	}

	// An odd cut point backs off to the previous character boundary.
	odd := "x" + long
	got, err = envelope.Parse([]byte(`{"success": false, "error": "` + odd + `"}`))
	require.NoError(t, err)
	require.Len(t, got.Error, envelope.MaxTextLen-1)
	require.True(t, utf8.ValidString(got.Error))

	// A long status that starts like "succeeded" is not success.
	got, err = envelope.Parse([]byte(`{"status": "succeeded` + strings.Repeat("!", envelope.MaxTextLen) + `"}`))
	require.NoError(t, err)
	require.False(t, got.Succeeded)
	require.Len(t, got.Status, envelope.MaxTextLen)
}

// A 10 MB payload passes through uncut; Parse does not bound it.
func TestParseLargePayload(t *testing.T) {
	t.Parallel()
	big := `"` + strings.Repeat("a", 10<<20) + `"`
	got, err := envelope.Parse([]byte(`{"status": "succeeded", "payload": ` + big + `}`))
	require.NoError(t, err)
	require.True(t, got.Succeeded)
	require.Len(t, got.Payload, len(big))
}
