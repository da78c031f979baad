// Package scaffold writes the SQL of a new supervisor-driven process: the seven steps of seed
// 002's recipe ("Implementing a new supervisor-driven business process"), with TODOs only where
// business logic goes. `taskorch scaffold process NAME` is its command.
package scaffold

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"
)

//go:embed process.sql.tmpl
var processTemplate string

var tmpl = template.Must(template.Must(template.Must(template.Must(template.New("process").Parse(processTemplate)).
	Parse(channelKitTemplate)).Parse(channelRetryTemplate)).Parse(channelPermanentTemplate))

// Process describes the process to write.
type Process struct {
	// Name of the process, e.g. "send_reminder": tables send_reminder_task, send_reminder_attempt,
	// ...; functions kickoff_send_reminder, send_reminder_supervisor, ...
	Name string
	// Schema the process lives in, e.g. "billing". Defaults to "app".
	Schema string
	// Key is the id column of the domain row the process is about (one process per key), e.g.
	// "invoice_id". Defaults to "subject_id".
	Key string
	// Channel is the task type of an attempt: "db_function" (pure SQL, the supervisor makes each
	// attempt itself) or a channel task type ("email", "sms", "file_delete", or your own) whose
	// provider call is wrapped in before/success/error handlers. Defaults to "db_function".
	Channel string
	// MaxAttempts before the process gives up. Defaults to 3.
	MaxAttempts int
	// WaitSignal, for a channel process, adds a wait step: after an attempt succeeded the
	// process waits up to WaitTimeout (e.g. "24 hours", the default; process_config.wait_timeout
	// once written) for this signal keyed by its Key's value (queues.signal); a signal sent first
	// skips the attempt; no signal within WaitTimeout ends the process timed_out (an outcome,
	// not a failure). Empty: no wait.
	WaitSignal, WaitTimeout string
}

var (
	identRE   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	channelRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]*$`)
)

// ErrInvalid is wrapped by every validation error of Render.
var ErrInvalid = errors.New("invalid process")

func (p *Process) defaults() error {
	if p.Schema == "" {
		p.Schema = "app"
	}
	if p.Key == "" {
		p.Key = "subject_id"
	}
	if p.Channel == "" {
		p.Channel = "db_function"
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 3
	}
	for _, f := range []struct{ what, v string }{{"name", p.Name}, {"schema", p.Schema}, {"key", p.Key}} {
		// Leave room for the longest derived name (<name>_attempt_succeeded_append_only) within
		// PostgreSQL's 63-byte identifiers.
		if !identRE.MatchString(f.v) || len(f.v) > 30 {
			return fmt.Errorf("%w: %s %q must be 1 to 30 lower-case letters, digits and underscores, starting with a letter", ErrInvalid, f.what, f.v)
		}
	}
	if p.Schema == "queues" || p.Schema == "internal" || p.Schema == "public" || p.Schema == "pg_catalog" || p.Schema == "information_schema" {
		return fmt.Errorf("%w: schema %q is reserved; choose your domain's schema", ErrInvalid, p.Schema)
	}
	if !channelRE.MatchString(p.Channel) || len(p.Channel) > 128 {
		return fmt.Errorf("%w: channel %q is not a task type", ErrInvalid, p.Channel)
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > 1000 {
		return fmt.Errorf("%w: max attempts %d must be between 1 and 1000", ErrInvalid, p.MaxAttempts)
	}
	if p.WaitSignal != "" && p.WaitTimeout == "" {
		p.WaitTimeout = "24 hours"
	}
	if p.WaitSignal != "" && p.DBFunction() {
		return fmt.Errorf("%w: a wait step (signal %q) needs a channel process; a db_function process waits in its own SQL", ErrInvalid, p.WaitSignal)
	}
	if p.WaitTimeout != "" && p.WaitSignal == "" {
		return fmt.Errorf("%w: a wait timeout needs a signal to wait for", ErrInvalid)
	}
	if !p.DBFunction() {
		return p.Kit().validate()
	}
	return nil
}

// DBFunction reports whether attempts run inside the supervisor (pure SQL).
func (p Process) DBFunction() bool { return p.Channel == "db_function" }

// Kit is the supervisor kit's spec of a channel process (kit.go), in the final form the shipped
// processes have (run-aware for retry by hand, a permanent failure ending a run at once, the
// plan settings), and fresh: nothing for callers of earlier versions.
func (p Process) Kit() ChannelProcess {
	return ChannelProcess{Schema: p.Schema, Name: p.Name, Key: p.Key, Channel: p.Channel,
		PayloadFn:    p.Schema + ".get_" + p.Name + "_payload",
		SuccessFn:    p.Schema + ".record_" + p.Name + "_success",
		FailureFn:    p.Schema + ".record_" + p.Name + "_failure",
		ResultColumn: "result", Noun: p.Name, Verb: "done",
		WaitSignal: p.WaitSignal, WaitTimeout: p.WaitTimeout,
		runs: true, permanent: true, plans: true, fresh: true}
}

// Function is one function a scaffolded process defines: its name (schema.name), its argument
// types, and whether the worker runs it (granted to worker_service_user).
type Function struct {
	Name, Args string
	Worker     bool
}

// Functions lists the functions the process's file defines, each once, in the order of the
// file's grants; none for a process Render refuses.
func (p Process) Functions() []Function {
	if p.defaults() != nil { // p is a copy
		return nil
	}
	s, n := p.Schema, p.Name
	if p.DBFunction() {
		return []Function{
			{Name: s + ".has_" + n + "_succeeded_attempt", Args: "bigint"},
			{Name: s + ".count_" + n + "_failed_attempts", Args: "bigint"},
			{Name: s + ".count_" + n + "_attempts", Args: "bigint"},
			{Name: s + ".is_" + n + "_stuck", Args: "bigint"},
			{Name: s + ".kickoff_" + n, Args: "bigint, timestamp with time zone"},
			{Name: s + "." + n + "_attempt_work", Args: "bigint, bigint"},
			{Name: s + "." + n + "_supervisor", Args: "jsonb", Worker: true},
			{Name: s + "." + n + "_wait_until", Args: "bigint"},
		}
	}
	var fs []Function
	for _, o := range p.Kit().objects() {
		if !o.view {
			fs = append(fs, Function{Name: o.name, Args: o.args, Worker: o.toWorker})
		}
	}
	return append(fs, Function{Name: s + ".is_" + n + "_stuck", Args: "bigint"},
		Function{Name: s + ".get_" + n + "_payload", Args: "jsonb", Worker: true})
}

// WorkerFunctions are the Functions the worker runs.
func (p Process) WorkerFunctions() []Function {
	var fs []Function
	for _, f := range p.Functions() {
		if f.Worker {
			fs = append(fs, f)
		}
	}
	return fs
}

// Title is the process's name for people, registered in queues.process: "send_reminder" ->
// "Send reminder". Name is validated (lower-case letters, digits and underscores), so it needs
// no quoting in SQL.
func (p Process) Title() string {
	t := strings.ReplaceAll(p.Name, "_", " ")
	return strings.ToUpper(t[:1]) + t[1:]
}

// Render returns the process's SQL, a migration file that psql can apply.
func Render(p Process) ([]byte, error) {
	if err := p.defaults(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
