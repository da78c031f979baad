package webhooks

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// resendEvent is the part of a Resend webhook event the handler reads: {"type": "email.bounced",
// "created_at": ..., "data": {"email_id": ..., "bounce": {"message", "type", "subType"}}}.
type resendEvent struct {
	Type string `json:"type"`
	Data struct {
		EmailID string `json:"email_id"`
		Bounce  struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			SubType string `json:"subType"`
		} `json:"bounce"`
	} `json:"data"`
}

// reason is the provider's words for a bounce: "Permanent/General: <message>".
func (e *resendEvent) reason() string {
	b := e.Data.Bounce
	kind := strings.Trim(b.Type+"/"+b.SubType, "/")
	switch {
	case kind != "" && b.Message != "":
		return kind + ": " + b.Message
	case kind != "":
		return kind
	}
	return b.Message
}

func (h *Handler) serveResend(w http.ResponseWriter, r *http.Request) {
	if !h.precheck(w, r, "resend", h.resendKey != nil, "TASKORCH_RESEND_WEBHOOK_SECRET") {
		return
	}
	info := map[string]any{}
	if id := r.Header.Get("svix-id"); id != "" {
		info["svix_id"] = truncate(id, 128)
	}
	body, rf := h.readBody(w, r)
	if rf == nil {
		rf = verifySvix(h.resendKey, r.Header, body, h.now(), h.cfg.Tolerance)
	}
	var ev resendEvent
	if rf == nil {
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(body, &ev) != nil {
			rf = refuse(http.StatusBadRequest, "the body is not a JSON object")
		}
	}
	if rf != nil {
		h.refused(w, r, "resend", rf, info)
		return
	}
	info["event"] = truncate(ev.Type, 128)
	switch ev.Type {
	case "email.delivered", "email.bounced", "email.complained":
	default:
		h.ignored(w, "resend", ev.Type, ev.Data.EmailID)
		return
	}
	if ev.Data.EmailID == "" {
		h.refused(w, r, "resend", refuse(http.StatusBadRequest, "a %s event without data.email_id", ev.Type), info)
		return
	}
	var reason *string
	if s := ev.reason(); s != "" && ev.Type == "email.bounced" {
		reason = &s
	}
	var outcome string
	err := h.pool.QueryRow(r.Context(), `select outcome from comms.record_email_delivery($1, $2, $3, $4::jsonb)`,
		ev.Data.EmailID, ev.Type, reason, string(body)).Scan(&outcome)
	if err != nil {
		h.dbFailed(w, r, "resend", err, info)
		return
	}
	h.recorded(w, "resend", ev.Type, ev.Data.EmailID, outcome)
}

// truncate cuts s to at most n bytes (for what goes into logs and queues.error).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
