/*
Package webhooks receives the delivery callbacks of the email and SMS providers taskorch ships
(Resend, Twilio) and records them as facts on the comms processes' attempts: an http.Handler a
Go program can mount in its own mux, which `taskorch worker` (on TASKORCH_HTTP_ADDR) and
`taskorch webhooks` also serve.

	h, err := webhooks.NewHandler(pool, webhooks.Config{
		ResendSecret:    os.Getenv("TASKORCH_RESEND_WEBHOOK_SECRET"),
		TwilioAuthToken: os.Getenv("TASKORCH_TWILIO_AUTH_TOKEN"),
		TwilioURL:       os.Getenv("TASKORCH_TWILIO_WEBHOOK_URL"),
	})
	if err != nil { ... }
	mux.Handle("/webhooks/", h) // POST /webhooks/resend, POST /webhooks/twilio

Each request is verified the way its provider documents it: Resend's are signed by Svix
(HMAC-SHA256 over "svix-id.svix-timestamp.body" with the whsec_ secret, the timestamp within 5
minutes), Twilio's carry X-Twilio-Signature (HMAC-SHA1 with the auth token over the URL Twilio
called and the sorted form parameters). A verified delivered, bounced or complained email, or a
delivered, undelivered or failed SMS, is recorded by one SQL function call in one transaction
(comms.record_email_delivery, comms.record_sms_delivery): a fact on the matching attempt and a
signal (queues.signal) keyed by the process. The handler writes no table itself; the database
role it connects as needs only EXECUTE on those functions and comms.record_webhook_refusal,
which the worker role has.

Refused requests (unsigned, mis-signed, replayed, oversized, unparseable, naming no attempt we
sent) answer 401, 400, 413 or 404 and are recorded in queues.error; nothing else is written. A
repeated callback answers 200 and changes nothing. An event the package does not record (an
email opened, an SMS queued) answers 200 and is logged. docs/providers.md, "Delivery webhooks",
lists the answers.
*/
package webhooks
