// Package processes holds the shipped business processes, one folder per migration set (comms:
// send_email and send_sms; files: file_deletion; accounts: account_deletion and
// account_anonymization). Each folder has the set's SQL (numbered migrations, one file per
// function and per view, definitions.sum) and a README.md that lists every part of its
// processes: the kit spec they are generated from, the Go channel code, webhooks, dashboard
// pages, docs and tests (processes/README.md is the index). The SQL is embedded into the binary;
// package migrations serves it with the core set.
package processes

import "embed"

// FS holds every process set: <set>/NNNN_name.sql, <set>/functions/..., <set>/views/...,
// <set>/definitions.sum.
//
//go:embed */*.sql */definitions.sum */functions */views
var FS embed.FS
