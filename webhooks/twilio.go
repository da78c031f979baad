package webhooks

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // Twilio signs with HMAC-SHA1; we verify what it sends
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// twilioSignature is base64(HMAC-SHA1(token, fullURL + each POST parameter's name and value,
// sorted by name)), as Twilio documents it ("Validating requests"). A name given several values
// contributes each, sorted, as Twilio's own libraries do.
func twilioSignature(token, fullURL string, form url.Values) string {
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(fullURL))
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vs := slices.Clone(form[k])
		slices.Sort(vs)
		for _, v := range vs {
			mac.Write([]byte(k))
			mac.Write([]byte(v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// twilioURL is the URL Twilio called, as it signed it: Config.TwilioURL (with the request's
// query string when it has none), else the URL the request reached the handler at.
func (h *Handler) twilioCalledURL(r *http.Request) string {
	if h.twilioURL != nil {
		u := *h.twilioURL
		if u.RawQuery == "" {
			u.RawQuery = r.URL.RawQuery
		}
		return u.String()
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.RequestURI()
}

// verifyTwilio checks X-Twilio-Signature in constant time.
func (h *Handler) verifyTwilio(r *http.Request, form url.Values) *refusal {
	got := r.Header.Get("X-Twilio-Signature")
	if got == "" {
		return refuse(http.StatusUnauthorized, "unsigned: no X-Twilio-Signature header")
	}
	want := twilioSignature(h.cfg.TwilioAuthToken, h.twilioCalledURL(r), form)
	if !hmac.Equal([]byte(got), []byte(want)) {
		return refuse(http.StatusUnauthorized, "the X-Twilio-Signature does not match the URL and form (another auth token, an altered form, or "+
			"a URL other than the one Twilio called: set TASKORCH_TWILIO_WEBHOOK_URL)")
	}
	return nil
}

func (h *Handler) serveTwilio(w http.ResponseWriter, r *http.Request) {
	if !h.precheck(w, r, "twilio", h.cfg.TwilioAuthToken != "", "TASKORCH_TWILIO_AUTH_TOKEN") {
		return
	}
	info := map[string]any{}
	body, rf := h.readBody(w, r)
	var form url.Values
	if rf == nil {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/x-www-form-urlencoded" {
			rf = refuse(http.StatusBadRequest, "the body is not a form (Content-Type %q, want application/x-www-form-urlencoded)",
				truncate(r.Header.Get("Content-Type"), 100))
		} else if form, err = url.ParseQuery(string(body)); err != nil {
			rf = refuse(http.StatusBadRequest, "the body is not a valid form: %v", err)
		}
	}
	if rf == nil {
		rf = h.verifyTwilio(r, form)
	}
	if rf != nil {
		h.refused(w, r, "twilio", rf, info)
		return
	}
	sid, status := form.Get("MessageSid"), form.Get("MessageStatus")
	info["message_sid"], info["message_status"] = truncate(sid, 64), truncate(status, 64)
	if sid == "" || status == "" {
		h.refused(w, r, "twilio", refuse(http.StatusBadRequest, "a status callback without MessageSid and MessageStatus"), info)
		return
	}
	switch status {
	case "delivered", "undelivered", "failed":
	default:
		h.ignored(w, "twilio", "sms."+status, sid)
		return
	}
	flat := make(map[string]string, len(form))
	for k := range form {
		flat[k] = form.Get(k)
	}
	payload, _ := json.Marshal(flat)
	var code, reason *string
	if c := strings.TrimSpace(form.Get("ErrorCode")); c != "" {
		code = &c
	}
	if m := strings.TrimSpace(form.Get("ErrorMessage")); m != "" {
		reason = &m
	}
	var outcome string
	err := h.pool.QueryRow(r.Context(), `select outcome from comms.record_sms_delivery($1, $2, $3, $4, $5::jsonb)`,
		sid, status, code, reason, string(payload)).Scan(&outcome)
	if err != nil {
		h.dbFailed(w, r, "twilio", err, info)
		return
	}
	h.recorded(w, "twilio", "sms."+status, sid, outcome)
}
