package migrate

import (
	"regexp"
	"strings"
)

// Statement is one SQL statement of a file, as Split finds it.
type Statement struct {
	// Comment is the block of comment lines right above the statement (no blank line between),
	// without a trailing newline; "" when there is none.
	Comment string
	// SQL is the statement from its first keyword through its semicolon.
	SQL string
	// Line is the 1-based line of the file the statement starts on.
	Line int
}

// Split cuts SQL text into its statements. It knows what PostgreSQL's lexer knows about where a
// semicolon does not end a statement: in comments (-- and nested /* */), string constants
// ('...', E'...' with backslash escapes), quoted identifiers and dollar-quoted strings ($$...$$,
// $tag$...$tag$). Text after the last semicolon that is not only comments and blank space is
// returned as a last statement without one.
func Split(text string) []Statement {
	var out []Statement
	start, line, startLine := 0, 1, 1
	i, n := 0, len(text)
	for i < n {
		c := text[i]
		switch {
		case c == '\n':
			line++
			i++
		case strings.HasPrefix(text[i:], "--"):
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				i = n
			} else {
				i += j
			}
		case strings.HasPrefix(text[i:], "/*"):
			for depth := 0; i < n; {
				switch {
				case strings.HasPrefix(text[i:], "/*"):
					depth++
					i += 2
				case strings.HasPrefix(text[i:], "*/"):
					depth--
					i += 2
				default:
					if text[i] == '\n' {
						line++
					}
					i++
				}
				if depth == 0 {
					break
				}
			}
		case c == '\'':
			escapes := i > 0 && (text[i-1] == 'E' || text[i-1] == 'e') && (i < 2 || !isIdentByte(text[i-2]))
			i++
			for i < n {
				if text[i] == '\n' {
					line++
				}
				if escapes && text[i] == '\\' {
					i += 2
					continue
				}
				if text[i] == '\'' {
					if i+1 < n && text[i+1] == '\'' {
						i += 2
						continue
					}
					break
				}
				i++
			}
			i++
		case c == '"':
			j := strings.IndexByte(text[i+1:], '"')
			if j < 0 {
				j = n - i - 1
			}
			line += strings.Count(text[i:i+1+j], "\n")
			i += j + 2
		case c == '$' && (i == 0 || !isIdentByte(text[i-1])):
			tag := dollarTag.FindString(text[i:])
			if tag == "" {
				i++
				continue
			}
			j := strings.Index(text[i+len(tag):], tag)
			if j < 0 {
				j = n - i - len(tag)
			}
			end := i + len(tag) + j + len(tag)
			if end > n {
				end = n
			}
			line += strings.Count(text[i:end], "\n")
			i = end
		case c == ';':
			out = append(out, statement(text[start:i+1], startLine))
			i++
			start, startLine = i, line
		default:
			i++
		}
	}
	if rest := text[start:]; strings.TrimSpace(stripComments(rest)) != "" {
		out = append(out, statement(rest, startLine))
	}
	return out
}

var dollarTag = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)?\$`)

func isIdentByte(b byte) bool {
	return b == '_' || b == '$' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

// statement separates the comment and blank lines at the start of a piece from its statement.
func statement(piece string, line int) Statement {
	lines := strings.Split(piece, "\n")
	k := 0
	for k < len(lines) {
		t := strings.TrimSpace(lines[k])
		if t != "" && !strings.HasPrefix(t, "--") {
			break
		}
		k++
	}
	// The comment block is the run of comment lines right above the statement.
	c := k
	for c > 0 && strings.HasPrefix(strings.TrimSpace(lines[c-1]), "--") {
		c--
	}
	return Statement{
		Comment: strings.Join(lines[c:k], "\n"),
		SQL:     strings.TrimRight(strings.Join(lines[k:], "\n"), " \t\n"),
		Line:    line + k,
	}
}

// stripComments removes -- comments, line by line (for deciding whether a tail is empty).
func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
