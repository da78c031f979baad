// Package pgtext makes Go strings storable in PostgreSQL text columns, bounded.
package pgtext

import (
	"strings"
	"unicode/utf8"
)

// Bound makes s storable and bounded: valid UTF-8 without NUL bytes (PostgreSQL text cannot
// hold them), at most n bytes, cut on a rune boundary with a mark saying it was cut.
func Bound(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", `\x00`)
	if len(s) <= n {
		return s
	}
	const mark = "…(truncated)"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
