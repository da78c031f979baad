package scaffold

import (
	"bytes"
	_ "embed"
	"fmt"
	"regexp"
	"strings"
	"text/template"
)

//go:embed channel_kit.sql.tmpl
var channelKitTemplate string

//go:embed channel_retry.sql.tmpl
var channelRetryTemplate string

//go:embed channel_permanent.sql.tmpl
var channelPermanentTemplate string

var kitTmpl = template.Must(template.Must(template.Must(template.New("kit").Parse(channelKitTemplate)).
	Parse(channelRetryTemplate)).Parse(channelPermanentTemplate))

// ChannelProcess is the spec of a channel process's supervisor machinery, the part every
// channel process shares: its agenda table (<name>_due), kickoff, the set-based supervisor
// that runs as ticks, and the success and error handlers. The business part (the message
// tables, the function applications call, the before handler that builds the provider request)
// is written by hand next to it.
type ChannelProcess struct {
	Schema string // e.g. "comms"
	Name   string // e.g. "send_email": tables <name>_task, <name>_attempt, ...
	// Key is the root table's unique column naming the domain row (one process per row), and
	// KeyTable the table it refers to; KeyNoun names that row in messages.
	Key, KeyTable, KeyNoun string
	// Channel is the task type of an attempt, e.g. "email".
	Channel string
	// PayloadFn, SuccessFn and FailureFn are the before, success and error handlers
	// (schema.function).
	PayloadFn, SuccessFn, FailureFn string
	// ResultColumn is <name>_attempt_succeeded's column for the provider's response.
	ResultColumn string
	// Noun and Verb make the give-up message: "<noun> not <verb> after N failed attempts".
	Noun, Verb string
	// KeyInPayload puts the root's Key in each attempt's channel task payload too.
	KeyInPayload bool
	// OnSuccess is PL/pgSQL the success handler runs after the success facts, with _id the
	// root's id (the business effect of a success, e.g. marking a file deleted). Optional.
	OnSuccess string
	// Delivery, when set, lets the process wait for the provider's delivery report after an
	// accepted attempt (process_config.delivery_wait).
	Delivery *Delivery
	// WaitSignal, when set, adds a wait step: after an attempt succeeded the process waits up to
	// process_config.wait_timeout for this signal keyed by its Key's value (queues.signal(WaitSignal,
	// key)); it arrives: succeeded; it does not: timed_out (the <name>_task_timed_out fact, "no
	// <signal> signal within <timeout>": an outcome, not a failure). A signal that arrived first
	// ends the process as succeeded without an attempt (more).
	// WaitTimeout (an SQL interval, e.g. "24 hours") is the value the scaffold writes into
	// process_config. Not with Delivery.
	WaitSignal, WaitTimeout string

	// runs: render the run-aware supervisor, success handler and facts helpers, which
	// count only the attempts and the failure of an instance's current run.
	runs bool
	// permanent: render the error handler that records the failure's class and the supervisor
	// that ends a run at its first permanent failure (channel_permanent.sql.tmpl).
	permanent bool
	// plans: render the per-attempt functions with the plan settings of kit_plan_settings in
	// their definitions.
	plans bool
	// fresh: a new process (the scaffold's), which no earlier version has callers of: without
	// wake_<name>_supervisor and the supervisor's per-instance payload of earlier versions.
	fresh bool
}

// Fresh reports whether the kit renders a new process, without what earlier versions' callers
// need (for the templates).
func (p ChannelProcess) Fresh() bool { return p.fresh }

// Runs reports whether the kit renders the run-aware supervisor of retry by hand (for the
// templates).
func (p ChannelProcess) Runs() bool { return p.runs }

// Permanent reports whether the kit renders the handling of permanent failures of
// channel_permanent.sql.tmpl (for the templates).
func (p ChannelProcess) Permanent() bool { return p.permanent }

// Delivery names a channel process's delivery facts: tables of its schema keyed by
// <name>_attempt_id, written when the provider reports what became of an accepted message.
type Delivery struct {
	DeliveredTable string // e.g. "send_email_attempt_delivered"
	FailedTable    string // e.g. "send_email_attempt_bounced"
	// FailedReason is an SQL expression over FailedTable's row b: the reason a failed
	// delivery gives, e.g. "b.kind || coalesce(': ' || b.reason, '')".
	FailedReason string
}

// SuccessFnShort is SuccessFn without its schema, as messages name it.
func (p ChannelProcess) SuccessFnShort() string { return short(p.SuccessFn) }

// FailureFnShort is FailureFn without its schema.
func (p ChannelProcess) FailureFnShort() string { return short(p.FailureFn) }

func short(fn string) string { return fn[strings.IndexByte(fn, '.')+1:] }

func (p ChannelProcess) validate() error {
	for _, f := range []struct{ what, v string }{{"schema", p.Schema}, {"name", p.Name}, {"key", p.Key}} {
		if !identRE.MatchString(f.v) || len(f.v) > 30 {
			return fmt.Errorf("%w: %s %q must be 1 to 30 lower-case letters, digits and underscores, starting with a letter", ErrInvalid, f.what, f.v)
		}
	}
	if !channelRE.MatchString(p.Channel) || len(p.Channel) > 128 {
		return fmt.Errorf("%w: channel %q is not a task type", ErrInvalid, p.Channel)
	}
	for _, f := range []struct{ what, v string }{{"key table", p.KeyTable}, {"before handler", p.PayloadFn},
		{"success handler", p.SuccessFn}, {"error handler", p.FailureFn}} {
		if f.what == "key table" && f.v == "" {
			continue // the kickoff gets a TODO to check the key's row instead
		}
		s, n, ok := strings.Cut(f.v, ".")
		if !ok || !identRE.MatchString(s) || !identRE.MatchString(n) {
			return fmt.Errorf("%w: %s %q must be schema.name", ErrInvalid, f.what, f.v)
		}
	}
	if !identRE.MatchString(p.ResultColumn) {
		return fmt.Errorf("%w: result column %q is not an identifier", ErrInvalid, p.ResultColumn)
	}
	if d := p.Delivery; d != nil && (!identRE.MatchString(d.DeliveredTable) || !identRE.MatchString(d.FailedTable) || d.FailedReason == "") {
		return fmt.Errorf("%w: delivery tables %q and %q must be identifiers, with a reason expression", ErrInvalid, d.DeliveredTable, d.FailedTable)
	}
	if p.WaitSignal != "" {
		switch {
		case p.Delivery != nil:
			return fmt.Errorf("%w: a process waits for a delivery report or for a signal, not both", ErrInvalid)
		case !signalRE.MatchString(p.WaitSignal):
			return fmt.Errorf("%w: signal %q must be 1 to 128 letters, digits and . _ : -", ErrInvalid, p.WaitSignal)
		case !intervalRE.MatchString(p.WaitTimeout):
			return fmt.Errorf("%w: wait timeout %q must be a number and a unit (seconds, minutes, hours or days), e.g. \"24 hours\"", ErrInvalid, p.WaitTimeout)
		}
	}
	words := []string{p.Noun, p.Verb}
	if p.KeyTable != "" {
		words = append(words, p.KeyNoun)
	}
	for _, f := range words {
		if f == "" || strings.ContainsAny(f, "'%\\\n") {
			return fmt.Errorf("%w: noun or verb %q must be plain words", ErrInvalid, f)
		}
	}
	return nil
}

var (
	signalRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	intervalRE = regexp.MustCompile(`^[1-9][0-9]{0,5} (second|minute|hour|day)s?$`)
)

// RenderPermanentTables returns, after header, the table changes of the handling of permanent
// failures for each process (docs/processes.md, "Permanent failures"): the class of each
// failure fact (<name>_attempt_failed.error_class). The functions that use it are the
// process's function files (Definitions).
func RenderPermanentTables(header string, ps ...ChannelProcess) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(header)
	for _, p := range ps {
		if err := p.validate(); err != nil {
			return nil, err
		}
		if err := kitTmpl.ExecuteTemplate(&buf, "channel_permanent_tables", p); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// Plans reports whether the per-attempt functions are rendered with the plan settings of
// kit_plan_settings in their definitions (docs/processes.md, "Plans"), rather than planning at
// every call (for the templates).
func (p ChannelProcess) Plans() bool { return p.plans }
