package webhooks

import "time"

// SetNow sets the handler's clock (for the documented Svix example, signed in 2021).
func (h *Handler) SetNow(now func() time.Time) { h.now = now }

// TwilioSignature exposes the signature the handler expects, for the documented example.
var TwilioSignature = twilioSignature
