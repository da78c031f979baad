// Package processtest tests taskorch's shipped business processes end to end: supervisor-driven
// SQL processes installed with `taskorch migrate up --processes comms,files,accounts` (or
// taskorch.MigrateOpts.Processes).
//
//   - comms: comms.send_email(...) and comms.send_sms(...) send a message through the email or
//     sms channel, retrying with exponential backoff up to a maximum number of attempts.
//   - files: files.kickoff_file_deletion(file_id) deletes a stored object through the
//     file_delete channel and marks the file deleted.
//   - accounts: api.request_account_deletion(account_id) deletes every file of an account,
//     then anonymizes it.
//
// Each follows the same building blocks: a root *_task row, *_attempt rows, one fact per
// attempt outcome (*_attempt_succeeded, *_attempt_failed), facts helpers, an idempotent kickoff,
// a security-definer supervisor that locks the root row, and idempotent before/success/error
// handlers granted to worker_service_user. See docs/processes.md.
//
// The SQL lives in the process sets' folders (processes/comms, processes/files,
// processes/accounts; processes/README.md indexes every part of each process); this package
// holds only the tests that run it with a real worker and the channel providers.
package processtest
