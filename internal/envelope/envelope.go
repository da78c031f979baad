// Package envelope parses the JSON envelope that SQL functions called by the worker return
// (supervisors, before/success/error handlers). docs/worker.md says what the worker does with
// each outcome.
//
// Two shapes are accepted, and may be mixed:
//
//	{"success": true, "error": "", "validation_failure_message": "", "payload": {...}}   // the success shape
//	{"status": "succeeded", "payload": {...}}                                              // the status shape
//
// The outcome is decided by these rules, in order:
//
//  1. A non-empty validation_failure_message is a validation failure (not succeeded),
//     whatever status or success say.
//  2. A non-empty status decides: "succeeded" is success; any other value is a named
//     non-success outcome (e.g. "max_attempts_reached").
//  3. Without a status, success decides: true is success, false is not.
//  4. With neither status nor success, a non-empty error is a non-success; an envelope with
//     none of the four is malformed.
//
// A JSON null counts as an absent field, and so does an empty status. Fields other than the
// five above are ignored; keys are matched exactly (case-sensitive). Anything else — input that
// is not JSON, not an object, null, or a known field of the wrong type — is an error wrapping
// ErrMalformed.
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxTextLen is the most bytes of Status, Error and ValidationFailureMessage a Result keeps
// (8 KiB, the bound queues.error applies to messages). Longer values are cut at a UTF-8
// character boundary, without a marker. Payload is not cut: it is the callee's data.
const MaxTextLen = 8 << 10

// StatusSucceeded is the status value that means success (the status shape).
const StatusSucceeded = "succeeded"

// ErrMalformed is wrapped by every error Parse returns: the input is not an envelope.
var ErrMalformed = errors.New("malformed envelope")

// Result is a parsed envelope.
type Result struct {
	// Succeeded is the outcome, decided by the rules in the package documentation.
	Succeeded bool

	// Status is the envelope's "status" (the status shape), cut to MaxTextLen; empty when absent.
	// Any value other than "succeeded" names a non-success outcome.
	Status string

	// Success is the envelope's "success" (the success shape); nil when absent or null. It only
	// decides the outcome when Status is empty.
	Success *bool

	// Error is the envelope's "error", an operational failure the callee reports, cut to
	// MaxTextLen; empty when absent. It does not turn a success into a failure.
	Error string

	// ValidationFailureMessage is the envelope's "validation_failure_message": a
	// non-retriable refusal of the input, cut to MaxTextLen; empty when absent. When
	// non-empty, Succeeded is false.
	ValidationFailureMessage string

	// Payload is the envelope's "payload" as it was sent: any JSON value, for the worker
	// (e.g. a before handler's provider request). Nil when absent or null.
	Payload json.RawMessage
}

// Parse parses an envelope. Errors wrap ErrMalformed and say what is wrong.
func Parse(raw []byte) (Result, error) {
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 {
		return Result{}, fmt.Errorf("%w: empty (did the function return NULL?)", ErrMalformed)
	}
	if !json.Valid(trimmed) {
		var syntax *json.SyntaxError
		if err := json.Unmarshal(trimmed, new(json.RawMessage)); errors.As(err, &syntax) {
			return Result{}, fmt.Errorf("%w: not valid JSON: %v (at byte %d)", ErrMalformed, err, syntax.Offset)
		}
		return Result{}, fmt.Errorf("%w: not valid JSON", ErrMalformed)
	}
	if trimmed[0] != '{' {
		return Result{}, fmt.Errorf("%w: expected a JSON object, got %s", ErrMalformed, describe(trimmed))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}

	var r Result
	status, hasStatus, err := stringField(fields, "status")
	if err != nil {
		return Result{}, err
	}
	if err := boolField(fields, "success", &r.Success); err != nil {
		return Result{}, err
	}
	if r.Error, _, err = stringField(fields, "error"); err != nil {
		return Result{}, err
	}
	if r.ValidationFailureMessage, _, err = stringField(fields, "validation_failure_message"); err != nil {
		return Result{}, err
	}
	if p, ok := fields["payload"]; ok && !isNull(p) {
		r.Payload = p
	}

	hasStatus = hasStatus && status != ""
	if !hasStatus && r.Success == nil && r.Error == "" && r.ValidationFailureMessage == "" {
		return Result{}, fmt.Errorf(`%w: no outcome: expected "status" ("succeeded" or another outcome's name) or "success" (true or false)`, ErrMalformed)
	}
	switch {
	case r.ValidationFailureMessage != "":
		r.Succeeded = false
	case hasStatus:
		r.Succeeded = status == StatusSucceeded
	case r.Success != nil:
		r.Succeeded = *r.Success
	}

	r.Status = truncate(status)
	r.Error = truncate(r.Error)
	r.ValidationFailureMessage = truncate(r.ValidationFailureMessage)
	return r, nil
}

// Outcome describes the result in a few words, for logs and queues.error:
// `succeeded`, `validation failure: <msg>`, `status "<status>"` (with `: <error>` when the
// envelope also has an error), `error: <msg>`, or `success false` when a failure gives no
// reason.
func (r Result) Outcome() string {
	switch {
	case r.Succeeded:
		return StatusSucceeded
	case r.ValidationFailureMessage != "":
		return "validation failure: " + r.ValidationFailureMessage
	case r.Status != "" && r.Error != "":
		return "status " + strconv.Quote(r.Status) + ": " + r.Error
	case r.Status != "":
		return "status " + strconv.Quote(r.Status)
	case r.Error != "":
		return "error: " + r.Error
	default:
		return "success false"
	}
}

// stringField reads fields[key] as a string; absent and null give "", false.
func stringField(fields map[string]json.RawMessage, key string) (string, bool, error) {
	v, ok := fields[key]
	if !ok || isNull(v) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, fmt.Errorf("%w: %q must be a string, got %s", ErrMalformed, key, describe(v))
	}
	return s, true, nil
}

// boolField reads fields[key] as a boolean into *dst; absent and null leave it nil.
func boolField(fields map[string]json.RawMessage, key string, dst **bool) error {
	v, ok := fields[key]
	if !ok || isNull(v) {
		return nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return fmt.Errorf("%w: %q must be a boolean, got %s", ErrMalformed, key, describe(v))
	}
	*dst = &b
	return nil
}

// isNull reports whether v (a value taken from a valid JSON document) is null.
func isNull(v json.RawMessage) bool {
	return string(bytes.TrimSpace(v)) == "null"
}

// describe names the JSON type of v, a valid JSON value, for an error message.
func describe(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// truncate cuts s to at most MaxTextLen bytes without splitting a UTF-8 character.
func truncate(s string) string {
	if len(s) <= MaxTextLen {
		return s
	}
	cut := MaxTextLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
