package taskorch

import (
	"context"
	"encoding/json"
)

// withTraceContext adds the W3C traceparent (and tracestate) that ClientConfig.TraceContext finds
// in ctx to a JSON object payload that does not carry one yet, so the worker's span links back to
// the enqueuer. Without TraceContext, or without a trace in ctx, the payload is unchanged.
func (c *Client) withTraceContext(ctx context.Context, payload string) string {
	if c.cfg.TraceContext == nil {
		return payload
	}
	parent, state := c.cfg.TraceContext(ctx)
	if parent == "" {
		return payload
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(payload), &m); err != nil || m == nil {
		return payload
	}
	if _, ok := m["traceparent"]; ok {
		return payload
	}
	m["traceparent"], _ = json.Marshal(parent)
	if state != "" {
		m["tracestate"], _ = json.Marshal(state)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return payload
	}
	return string(out)
}
