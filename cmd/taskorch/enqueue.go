package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
)

func newEnqueueCmd(g *globals) *cobra.Command {
	var (
		priority    int
		at          string
		key         string
		maxAttempts int
		file        string
		maxPayload  int
	)
	cmd := &cobra.Command{
		Use:   "enqueue TYPE PAYLOAD | enqueue TYPE --file FILE",
		Short: "Enqueue one task (PAYLOAD is a JSON object), or one per line of a file",
		Long: `Enqueues one task of TYPE with PAYLOAD, a JSON object, and prints its id.

With --file, enqueues one task per line of FILE (- for standard input), each line a JSON object,
in one transaction: a bad line (reported with its number) enqueues nothing. Progress is shown on
a terminal; scripts get the count (or, with --json, the count and the first and last ids).`,
		Example: `  taskorch enqueue db_function '{"db_function":"comms.send_email_supervisor","send_email_task_id":1}'
  taskorch enqueue report '{"account_id":7}' --priority 5 --at 2030-01-02T15:04:05Z --key report-7
  taskorch enqueue report --file reports.jsonl`,
		Args: func(cmd *cobra.Command, args []string) error {
			want := 2
			if file != "" {
				want = 1
			}
			if len(args) != want {
				return usageErrorf("enqueue takes TYPE and PAYLOAD, or TYPE and --file FILE; got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := taskorch.ValidateTaskType(args[0]); err != nil {
				return err
			}
			opts := &taskorch.EnqueueOpts{IdempotencyKey: key, MaxAttempts: maxAttempts}
			if cmd.Flags().Changed("priority") {
				opts.Priority = &priority
			}
			if at != "" {
				t, err := time.Parse(time.RFC3339Nano, at)
				if err != nil {
					return usageErrorf("--at %q is not an RFC 3339 timestamp such as 2030-01-02T15:04:05Z", at)
				}
				opts.ScheduledAt = t
			}
			if cmd.Flags().Changed("max-attempts") && maxAttempts < 1 {
				return usageErrorf("--max-attempts must be at least 1, got %d", maxAttempts)
			}
			if maxPayload < 1 {
				return usageErrorf("--max-payload-bytes must be at least 1, got %d", maxPayload)
			}
			if file != "" {
				if key != "" {
					return usageErrorf("--key names one task; it cannot go with --file")
				}
				return enqueueFile(cmd, g, args[0], file, opts, maxPayload)
			}
			payload, err := parsePayload(args[1])
			if err != nil {
				return err
			}
			if err := checkPayloadSize(len(payload), maxPayload); err != nil {
				return err
			}
			c, closeFn, err := g.clientWith(cmd.Context(), &taskorch.ClientConfig{MaxPayloadBytes: maxPayload})
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := c.Enqueue(cmd.Context(), taskorch.RawArgs{Type: args[0], Payload: payload}, opts)
			if err != nil {
				return err
			}
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"task_id": res.TaskID, "duplicate": res.Duplicate})
			}
			if res.Duplicate {
				fmt.Fprintf(cmd.OutOrStdout(), "%d (existing task with key %q)\n", res.TaskID, key)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.TaskID)
			return nil
		},
	}
	cmd.Flags().IntVar(&priority, "priority", 0, "higher runs first")
	cmd.Flags().StringVar(&at, "at", "", "run no earlier than this RFC 3339 time (default now)")
	cmd.Flags().StringVar(&key, "key", "", "idempotency key: one task per (TYPE, key)")
	cmd.Flags().IntVar(&maxAttempts, "max-attempts", 0, "attempts before the task is dead (default 25)")
	cmd.Flags().IntVar(&maxPayload, "max-payload-bytes", defaultMaxPayloadBytes,
		"refuse a payload larger than this, as compact JSON; the database refuses one over 8 MiB whatever it is")
	cmd.Flags().StringVar(&file, "file", "", "enqueue one task per line of this file of JSON objects (- for standard input)")
	addJSONFlag(cmd, g)
	return cmd
}

// defaultMaxPayloadBytes is enqueue's bound on a payload: the Go client's default
// (taskorch.ClientConfig.MaxPayloadBytes), below the database's hard limit of 8 MiB.
const defaultMaxPayloadBytes = 1 << 20

// checkPayloadSize refuses a payload of n bytes over max, saying which bound it hit and how to
// change it.
func checkPayloadSize(n, maxBytes int) error {
	if n <= maxBytes {
		return nil
	}
	return usageErrorf("PAYLOAD is %d bytes, over taskorch enqueue's limit of %d bytes (%.4g MiB): raise it with "+
		"--max-payload-bytes; the database refuses payloads over 8 MiB whatever it is", n, maxBytes, float64(maxBytes)/(1<<20))
}

// parsePayload checks that s is one JSON object and returns it compacted.
func parsePayload(s string) (json.RawMessage, error) {
	// PostgreSQL's jsonb holds valid UTF-8 without NUL characters: say so here rather than let
	// the database refuse it with a less helpful message.
	if !utf8.ValidString(s) {
		return nil, usageErrorf("PAYLOAD is not valid UTF-8")
	}
	var v any
	dec := json.NewDecoder(bytesReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, usageErrorf("PAYLOAD is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, usageErrorf("PAYLOAD holds more than one JSON value")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, usageErrorf("PAYLOAD must be a JSON object such as '{\"id\": 1}', got %s", jsonKind(v))
	}
	if hasNUL(v) {
		return nil, usageErrorf(`PAYLOAD holds \u0000 (a NUL character), which PostgreSQL cannot store in jsonb`)
	}
	if n, ok := numberOutOfRange(v); ok {
		return nil, usageErrorf("PAYLOAD holds the number %.40s, which PostgreSQL cannot store in jsonb "+
			"(at most 131,072 digits before the decimal point and 16,383 after it)", n)
	}
	// Re-encoded, so what is sent is JSON PostgreSQL accepts (a lone UTF-16 surrogate escape
	// such as \ud800 becomes U+FFFD) with the numbers exactly as given.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, usageErrorf("PAYLOAD: %v", err)
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// hasNUL reports whether a decoded JSON value holds a NUL character in a key or a string.
func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// PostgreSQL's numeric (which jsonb stores numbers as) holds at most this many digits before
// the decimal point and this many after it, and refuses exponents from ±(2³¹−1)/2 on.
const (
	numericMaxWeight = 131072
	numericMaxScale  = 16383
	numericMaxExp    = 1<<30 - 1
)

// numberOutOfRange returns a number of a decoded JSON value (decoded with UseNumber) that
// PostgreSQL's numeric cannot hold, judged the way its input function counts: the digits
// before the decimal point (from the first significant one, moved by the exponent) and the
// digits after it as written (less the exponent).
func numberOutOfRange(v any) (string, bool) {
	switch v := v.(type) {
	case json.Number:
		if !numericFits(string(v)) {
			return string(v), true
		}
	case []any:
		for _, e := range v {
			if n, ok := numberOutOfRange(e); ok {
				return n, true
			}
		}
	case map[string]any:
		for _, e := range v {
			if n, ok := numberOutOfRange(e); ok {
				return n, true
			}
		}
	}
	return "", false
}

// numericFits reports whether PostgreSQL's numeric input accepts the JSON number s.
func numericFits(s string) bool {
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
		if err != nil || e >= numericMaxExp || e <= -numericMaxExp {
			return false
		}
		exp = e
	}
	mant = strings.TrimPrefix(mant, "-")
	intPart, frac, _ := strings.Cut(mant, ".")
	if int64(len(frac))-exp > numericMaxScale {
		return false
	}
	if digits := strings.TrimLeft(intPart, "0"); digits != "" {
		return int64(len(digits))+exp <= numericMaxWeight
	}
	if sig := strings.TrimLeft(frac, "0"); sig != "" {
		return exp-int64(len(frac)-len(sig)) <= numericMaxWeight
	}
	return true // zero: only its scale and exponent count
}
