package taskorch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Signal records the external event name for key (an email confirmed, a payment settled, a
// provider's delivery report) with payload, once, and makes every task waiting for it due now
// (queues.signal; docs/processes.md, "Waiting for the outside world"). recorded is true when
// this call recorded it and false when it had arrived already: the first emit's payload stays
// and nothing changes, so a repeated call is harmless.
//
// payload is marshalled to JSON and must be a JSON object; nil means {}. An empty name or key,
// a name over 128 or a key over 512 characters, a payload that is not an object or is larger
// than ClientConfig.MaxPayloadBytes give ErrInvalidInput and record nothing.
//
// The role the client connects as needs EXECUTE on queues.signal, which the operator grants
// (docs/security.md).
func (c *Client) Signal(ctx context.Context, name, key string, payload any) (recorded bool, err error) {
	return c.signal(ctx, c.pool, name, key, payload)
}

// SignalTx is Signal in the caller's transaction: the event is recorded, and waiting tasks made
// due, when tx commits.
func (c *Client) SignalTx(ctx context.Context, tx pgx.Tx, name, key string, payload any) (recorded bool, err error) {
	return c.signal(ctx, tx, name, key, payload)
}

func (c *Client) signal(ctx context.Context, db DBTX, name, key string, payload any) (bool, error) {
	if err := c.checkOpen(); err != nil {
		return false, err
	}
	body, err := c.signalPayload(name, key, payload)
	if err != nil {
		return false, err
	}
	var recorded bool
	if err := db.QueryRow(ctx, `select queues.signal($1, $2, $3::jsonb)`, name, key, string(body)).Scan(&recorded); err != nil {
		return false, fmt.Errorf("signal %q key %q: %w", name, key, mapError(err))
	}
	return recorded, nil
}

// signalPayload checks a signal's name and key and returns its payload as a JSON object.
func (c *Client) signalPayload(name, key string, payload any) ([]byte, error) {
	switch {
	case name == "":
		return nil, inputErrorf("signal: name must not be empty")
	case utf8.RuneCountInString(name) > 128:
		return nil, inputErrorf("signal: name is %d characters, over the limit of 128", utf8.RuneCountInString(name))
	case key == "":
		return nil, inputErrorf("signal %q: key must not be empty", name)
	case utf8.RuneCountInString(key) > 512:
		return nil, inputErrorf("signal %q: key is %d characters, over the limit of 512", name, utf8.RuneCountInString(key))
	}
	if payload == nil {
		return []byte("{}"), nil
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, inputErrorf("signal %q: payload: %v", name, err)
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, inputErrorf("signal %q: payload must be a JSON object, got %s", name, jsonKind(trimmed))
	}
	if c.cfg.MaxPayloadBytes > 0 && len(body) > c.cfg.MaxPayloadBytes {
		return nil, inputErrorf("signal %q: payload is %d bytes, over the limit of %d bytes (ClientConfig.MaxPayloadBytes)",
			name, len(body), c.cfg.MaxPayloadBytes)
	}
	return body, nil
}

// jsonKind names the JSON type of a marshalled value, for error messages.
func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}
