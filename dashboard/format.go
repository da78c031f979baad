package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/admin"
	"github.com/taskorch/taskorch/internal/humanize"
	"github.com/taskorch/taskorch/internal/redact"
)

// templateFuncs are the helpers the templates use. None returns template.HTML: everything they
// produce is escaped by html/template like any other value.
var templateFuncs = template.FuncMap{
	"ts":      formatTime,
	"ago":     ago,
	"secs":    formatSeconds,
	"num":     formatInt,
	"json":    prettyJSON,
	"compact": compactJSON,
	"trunc":   truncate,
	"redact":  redactText,
	"str":     derefString,
	"pct":     percent,
	"add":     func(a, b int) int { return a + b },
	"status":  statusClass,
	"callfail": func(reason *string) string {
		if reason == nil {
			return ""
		}
		return taskorch.CallFailureLabel(*reason)
	},
	"until": until,
	// servehint says what kind of worker runs a task type (a warning about a type no worker claims).
	"servehint": admin.ServeHint,
}

// queryURL encodes a link's query string. url.Values.Encode escapes every key and value, so
// html/template may put the result in an href as it is (it would escape a plain string's "&"
// and "=" again).
func queryURL(v url.Values) template.URL {
	return template.URL(v.Encode()) //nolint:gosec // every part is escaped by Encode
}

// formatTime shows a time in UTC to the second; nil or zero shows as a dash.
func formatTime(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x == nil {
			return "–"
		}
		t = *x
	default:
		return "–"
	}
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// ago says how long before now a time was ("3m ago", "in 2h" for a future one).
func ago(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x == nil {
			return ""
		}
		t = *x
	default:
		return ""
	}
	if t.IsZero() {
		return ""
	}
	d := time.Since(t) // saturated, and so is Abs: no overflow however far t is
	if d < 0 {
		return "in " + shortDuration(d.Abs())
	}
	return shortDuration(d) + " ago"
}

// until is the time left before t ("4m 10s"), or "expired".
func until(v any) string {
	t, ok := v.(*time.Time)
	if !ok || t == nil {
		if tt, ok2 := v.(time.Time); ok2 {
			t = &tt
		} else {
			return ""
		}
	}
	d := time.Until(*t)
	if d <= 0 {
		return "expired " + shortDuration(d.Abs()) + " ago"
	}
	return "in " + shortDuration(d)
}

// shortDuration rounds a duration to its two largest units: 45s, 3m 12s, 5h 3m, 2d 4h; from
// 100 years on, "more than 100 years" (humanize.Duration).
func shortDuration(d time.Duration) string { return humanize.Duration(d) }

// formatSeconds shows a number of seconds as a short duration.
func formatSeconds(s float64) string {
	if s <= 0 || math.IsNaN(s) {
		return "–"
	}
	return shortDuration(humanize.FromSeconds(s))
}

// formatInt writes an integer with thousands separators: 1,234,567.
func formatInt(v any) string {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case int32:
		n = int64(x)
	default:
		return fmt.Sprint(v)
	}
	return humanize.Thousands(n)
}

// percent is part/whole in percent with one decimal, or a dash when whole is 0.
func percent(part, whole int64) string {
	if whole <= 0 {
		return "–"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
}

// truncate shortens s to n runes, with an ellipsis.
func truncate(n int, s string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// statusClass is the CSS class of a status badge.
func statusClass(s any) string {
	return "st st-" + fmt.Sprint(s)
}

// redactText masks the secrets in a text shown on a page, such as an error message: URL
// passwords (postgres://user:xxxxx@host) and key=value secrets (password=xxxxx), by
// redact.String, the rule the payload views, the command line and the worker's logs share.
func redactText(s string) string { return redact.String(s) }
