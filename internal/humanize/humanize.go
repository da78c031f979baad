// Package humanize formats numbers for people to read: the dashboard's counts and the reports
// of taskorch bench and the chaos harness.
package humanize

import (
	"strconv"
	"strings"
)

// Thousands formats n with comma thousands separators: 1234567 -> "1,234,567".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
