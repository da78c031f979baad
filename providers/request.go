package providers

import (
	"bytes"
	"encoding/json"
	"net/mail"
	"strings"

	"github.com/taskorch/taskorch"
)

// EmailRequest is the request of an email channel call: what the before handler returns as its
// payload (or the task's payload when there is no before handler). Other fields are ignored.
type EmailRequest struct {
	// To is the one recipient: "a@example.com" or "Name <a@example.com>". Required.
	To string `json:"to"`
	// From is the sender; empty means the provider's default sender (TASKORCH_EMAIL_FROM).
	From string `json:"from,omitempty"`
	// Subject is required.
	Subject string `json:"subject"`
	// Text and HTML are the bodies; at least one is required. With both, the message is
	// multipart/alternative.
	Text string `json:"text,omitempty"`
	HTML string `json:"html,omitempty"`
	// ReplyTo is an optional Reply-To address.
	ReplyTo string `json:"reply_to,omitempty"`
	// IdempotencyKey, when set, is passed to providers that deduplicate (Resend) instead of the
	// call's key. A process derives it from its attempt id.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// SMSRequest is the request of an sms channel call. Other fields are ignored.
type SMSRequest struct {
	// To is the recipient's number in E.164 form, e.g. "+15551234567". Required.
	To string `json:"to"`
	// Body is the text. Required.
	Body string `json:"body"`
	// From is the sender; empty means the provider's default (TASKORCH_TWILIO_FROM). With
	// Twilio it may be a number or a Messaging Service SID (MG...).
	From string `json:"from,omitempty"`
	// IdempotencyKey is accepted for symmetry; Twilio has no idempotency key.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// FileDeleteRequest is the request of a file_delete channel call. Other fields are ignored.
type FileDeleteRequest struct {
	// Bucket and ObjectKey name the object to delete. Both required.
	Bucket    string `json:"bucket"`
	ObjectKey string `json:"object_key"`
}

// decodeRequest unmarshals a channel request, which must be a JSON object.
func decodeRequest(provider string, raw json.RawMessage, v any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return badRequest(provider, "the request is empty (the before handler returned no payload)")
	}
	if trimmed[0] != '{' {
		return badRequest(provider, "the request must be a JSON object, got %s", snippet(trimmed))
	}
	if err := json.Unmarshal(trimmed, v); err != nil {
		return badRequest(provider, "the request is not valid: %v", err)
	}
	return nil
}

// parseEmail reads and checks an email request; defaultFrom fills an empty from when
// needFrom (the outbox records requests as they are).
func parseEmail(provider string, call taskorch.ChannelCall, defaultFrom string, needFrom bool) (EmailRequest, error) {
	var r EmailRequest
	if err := decodeRequest(provider, call.Request, &r); err != nil {
		return r, err
	}
	r.To = strings.TrimSpace(r.To)
	switch {
	case r.To == "":
		return r, badRequest(provider, `"to" is missing`)
	case r.Subject == "":
		return r, badRequest(provider, `"subject" is missing`)
	case r.Text == "" && r.HTML == "":
		return r, badRequest(provider, `the email has no body: set "text", "html" or both`)
	}
	if _, err := mail.ParseAddress(r.To); err != nil {
		return r, badRequest(provider, `"to" is not one email address (%q): %v`, r.To, err)
	}
	if r.ReplyTo != "" {
		if _, err := mail.ParseAddress(r.ReplyTo); err != nil {
			return r, badRequest(provider, `"reply_to" is not an email address (%q): %v`, r.ReplyTo, err)
		}
	}
	if r.From == "" {
		r.From = defaultFrom
	}
	if r.From == "" && needFrom {
		return r, badRequest(provider, `"from" is missing and no default sender is configured (TASKORCH_EMAIL_FROM)`)
	}
	if r.From != "" {
		if _, err := mail.ParseAddress(r.From); err != nil {
			return r, badRequest(provider, `"from" is not an email address (%q): %v`, r.From, err)
		}
	}
	if r.IdempotencyKey == "" {
		r.IdempotencyKey = call.IdempotencyKey
	}
	return r, nil
}

// parseSMS reads and checks an sms request.
func parseSMS(provider string, call taskorch.ChannelCall, defaultFrom string, needFrom bool) (SMSRequest, error) {
	var r SMSRequest
	if err := decodeRequest(provider, call.Request, &r); err != nil {
		return r, err
	}
	r.To = strings.TrimSpace(r.To)
	switch {
	case r.To == "":
		return r, badRequest(provider, `"to" is missing`)
	case r.Body == "":
		return r, badRequest(provider, `"body" is missing`)
	}
	if r.From == "" {
		r.From = defaultFrom
	}
	if r.From == "" && needFrom {
		return r, badRequest(provider, `"from" is missing and no default sender is configured (TASKORCH_TWILIO_FROM)`)
	}
	if r.IdempotencyKey == "" {
		r.IdempotencyKey = call.IdempotencyKey
	}
	return r, nil
}

// parseFileDelete reads and checks a file_delete request.
func parseFileDelete(provider string, call taskorch.ChannelCall) (FileDeleteRequest, error) {
	var r FileDeleteRequest
	if err := decodeRequest(provider, call.Request, &r); err != nil {
		return r, err
	}
	switch {
	case r.Bucket == "":
		return r, badRequest(provider, `"bucket" is missing`)
	case r.ObjectKey == "":
		return r, badRequest(provider, `"object_key" is missing`)
	}
	return r, nil
}
