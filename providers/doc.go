/*
Package providers holds the channel providers a taskorch worker calls for the channel task
types: email (Resend, SMTP), sms (Twilio) and file_delete (a files HTTP service that signs
DELETE URLs, or an S3-compatible store presigned here), plus Outbox, the development provider
of all three, which records each request in the database instead of sending it.

Each provider is a taskorch.ChannelProvider: the worker runs the task's before handler, calls
the provider with the handler's payload as the request, and hands the provider's response to
the success handler as worker_payload (or the error to the error handler).

# Requests and responses

The request is a JSON object; fields other than these are ignored:

	email        {"to", "subject", "text" and/or "html", "from"?, "reply_to"?, "idempotency_key"?}
	sms          {"to", "body", "from"?, "idempotency_key"?}
	file_delete  {"bucket", "object_key"}

An empty "from" means the configured default sender (Config.EmailFrom, Config.TwilioFrom). The
response is a small JSON object naming the provider and what it returned:

	{"provider":"resend","id":"..."}
	{"provider":"smtp","message_id":"<...>"}
	{"provider":"twilio","sid":"SM...","status":"queued"}
	{"provider":"s3","bucket":"...","object_key":"...","http_status":204,"already_gone":false}
	{"provider":"files_http", ... the same ...}
	{"provider":"outbox","outbox_message_id":42}

# Errors

A failure retrying cannot fix (a 4xx answer, a permanent 5xx SMTP reply, a malformed request,
a refused signature) is returned wrapped in taskorch.Discard; a 5xx, a 429, a timeout or a
network error is returned as is, to be retried. Either way errors.As finds an *Error with the
status and the provider's code. No error message holds a credential.

# Idempotency

A provider call may be repeated: the worker may crash after the call and before the success
handler. Resend deduplicates by the request's "idempotency_key" (or the call's key,
"taskorch-task-<id>"), sent as its Idempotency-Key header. SMTP and Twilio have no such key: a
repeated call may send twice. Deleting a file is idempotent (an object already gone counts as
deleted).

# Configuration

Config, read from the TASKORCH_* variables by ConfigFromEnv, chooses each channel's provider;
Config.Channels builds them for taskorch.WorkerConfig.Channels. docs/providers.md describes
each provider, its settings and its error mapping.
*/
package providers
