package envelope_test

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/taskorch/taskorch/internal/envelope"
)

// FuzzParse checks that Parse never panics, that every error wraps ErrMalformed, and that a
// Result is consistent with the rules: re-encoding its fields as an envelope parses back to
// the same Result. The committed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"status": "succeeded", "payload": {"a": 1}}`,
		`{"success": false, "error": "x", "validation_failure_message": "", "payload": null}`,
		`{"success": true, "validation_failure_message": "no"}`,
		`{"status": 5}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := envelope.Parse(raw)
		if err != nil {
			if !errors.Is(err, envelope.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		checkConsistent(t, r)

		// Re-encode the fields as an envelope: it must parse back to the same Result.
		m := map[string]any{}
		if r.Status != "" {
			m["status"] = r.Status
		}
		if r.Success != nil {
			m["success"] = *r.Success
		}
		if r.Error != "" {
			m["error"] = r.Error
		}
		if r.ValidationFailureMessage != "" {
			m["validation_failure_message"] = r.ValidationFailureMessage
		}
		if r.Payload != nil {
			m["payload"] = r.Payload
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("re-marshal %+v: %v", r, err)
		}
		r2, err := envelope.Parse(again)
		if err != nil {
			t.Fatalf("re-encoded envelope %s does not parse: %v", again, err)
		}
		// Payload is compacted by json.Marshal; compare the rest, and the payload's meaning.
		if r2.Succeeded != r.Succeeded || r2.Status != r.Status || r2.Error != r.Error ||
			r2.ValidationFailureMessage != r.ValidationFailureMessage || !sameBool(r2.Success, r.Success) ||
			(r2.Payload == nil) != (r.Payload == nil) {
			t.Fatalf("round trip changed the result:\n in  %q\n got %+v\n out %s\n got %+v", raw, r, again, r2)
		}
		if r2.Outcome() != r.Outcome() {
			t.Fatalf("round trip changed the outcome: %q, then %q", r.Outcome(), r2.Outcome())
		}
	})
}

// checkConsistent checks a Result against the rules in the package documentation.
func checkConsistent(t *testing.T, r envelope.Result) {
	t.Helper()
	for name, s := range map[string]string{
		"status": r.Status, "error": r.Error, "validation_failure_message": r.ValidationFailureMessage,
	} {
		if len(s) > envelope.MaxTextLen {
			t.Fatalf("%s is %d bytes, over MaxTextLen", name, len(s))
		}
		if !utf8.ValidString(s) {
			t.Fatalf("%s is not valid UTF-8: %q", name, s)
		}
	}
	if r.Succeeded {
		if r.ValidationFailureMessage != "" {
			t.Fatalf("succeeded with a validation failure message: %+v", r)
		}
		if r.Status != envelope.StatusSucceeded && (r.Status != "" || r.Success == nil || !*r.Success) {
			t.Fatalf("succeeded without status succeeded or success true: %+v", r)
		}
		if r.Outcome() != "succeeded" {
			t.Fatalf("succeeded but Outcome is %q", r.Outcome())
		}
	} else {
		if r.ValidationFailureMessage == "" && (r.Status == envelope.StatusSucceeded ||
			(r.Status == "" && r.Success != nil && *r.Success)) {
			t.Fatalf("not succeeded, yet no validation failure and a succeeding status/success: %+v", r)
		}
		if r.Status == "" && r.Success == nil && r.Error == "" && r.ValidationFailureMessage == "" {
			t.Fatalf("a result without any outcome field was accepted: %+v", r)
		}
		if r.Outcome() == "succeeded" || r.Outcome() == "" {
			t.Fatalf("not succeeded but Outcome is %q", r.Outcome())
		}
	}
	if r.Payload != nil && !json.Valid(r.Payload) {
		t.Fatalf("payload is not valid JSON: %q", r.Payload)
	}
}

func sameBool(a, b *bool) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
