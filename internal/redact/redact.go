// Package redact masks secrets in what taskorch shows to people: the dashboard's payloads,
// results and error messages, the command line's task listings, and the worker's log lines of
// task failures. It is the one place that decides what looks like a secret (docs/security.md,
// "Secrets on pages, in listings and in logs"):
//
//   - in JSON, the value of every key that names a secret (IsSecretKey), at any depth,
//     whatever its type except null and true/false, is replaced by Mask;
//   - in text, and in every JSON string, the password of a URL's user information
//     (postgres://user:pass@host) and the value of a key=value or key: value pair whose key
//     names a secret (password=..., X-Api-Key: ..., Authorization: Bearer ...) are replaced
//     by Mask.
//
// Masking errs on the side of hiding: a key such as "max_tokens" is masked too. The database
// keeps every value as it was written.
package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"unicode"
)

// Mask replaces a secret.
const Mask = "xxxxx"

// secretParts mark a key as a secret wherever they appear in it, once it is lower-cased and
// stripped of separators: "X-Api-Key", "apiKey" and "API_KEY" all contain "apikey".
var secretParts = []string{
	"password", "passwd", "passphrase", "secret", "token", "apikey", "authorization",
	"credential", "privatekey", "accesskey", "cookie", "session", "signature",
}

// secretWords mark a key as a secret when they are one of its words (split at _, -, ., space
// and camelCase): "db_pwd" and "basicAuth", not "author" or "passenger".
var secretWords = []string{"pwd", "pass", "auth", "sig", "jwt"}

// IsSecretKey reports whether a JSON key, a header name or a key=value keyword names a secret:
// it contains password, passwd, passphrase, secret, token, apikey (api_key, api-key,
// x-api-key), authorization, credential, privatekey, accesskey, cookie, session or signature
// (ignoring case and the separators _ - . and space), or one of its words is pwd, pass, auth,
// sig or jwt.
func IsSecretKey(k string) bool {
	if k == "" {
		return false
	}
	words := splitWords(k)
	flat := strings.Join(words, "")
	for _, p := range secretParts {
		if strings.Contains(flat, p) {
			return true
		}
	}
	for _, w := range words {
		for _, s := range secretWords {
			if w == s {
				return true
			}
		}
	}
	return false
}

// splitWords lower-cases k and splits it into words at _ - . space and camelCase boundaries.
func splitWords(k string) []string {
	var words []string
	var cur strings.Builder
	var prev rune
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, r := range k {
		switch {
		case r == '_' || r == '-' || r == '.' || unicode.IsSpace(r):
			flush()
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			flush()
			cur.WriteRune(unicode.ToLower(r))
		default:
			cur.WriteRune(unicode.ToLower(r))
		}
		prev = r
	}
	flush()
	return words
}

var (
	// urlPassword is a URL's scheme and user, then its password up to the last @ before the
	// URL's path, query or fragment (a password may hold a raw @).
	urlPassword = regexp.MustCompile("(?i)\\b([a-z][a-z0-9+.-]*://[^:/?#@\\s\"'`<>]*:)[^/?#\\s\"'`<>]*@")
	// keySep is a keyword and its separator: password=, "token": , X-Api-Key: , \"pwd\":.
	keySep = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.-]*)(?:\\?["'])?\s*[=:]\s*`)
	// authScheme is an Authorization value's scheme, kept in front of the masked credentials.
	authScheme = regexp.MustCompile(`(?i)^(bearer|basic|token|digest|negotiate|apikey)\s+`)
)

// String masks the secrets in a text: URL passwords (postgres://user:xxxxx@host) and the
// values of key=value and key: value pairs whose key names a secret (IsSecretKey), quoted
// ("..." '...' \"...\") or not; an Authorization value keeps its scheme (Bearer xxxxx).
func String(s string) string {
	if s == "" {
		return s
	}
	s = urlPassword.ReplaceAllString(s, "${1}"+Mask+"@")
	var b strings.Builder
	done := 0 // s[:done] is written to b or masked
	for pos := 0; pos < len(s); {
		m := keySep.FindStringSubmatchIndex(s[pos:])
		if m == nil {
			break
		}
		keyStart, keyEnd, valStart := pos+m[2], pos+m[3], pos+m[1]
		if keyStart > 0 && isWordByte(s[keyStart-1]) {
			// The match starts inside a word (after a digit, say): not a keyword.
			pos = valStart
			continue
		}
		if !IsSecretKey(s[keyStart:keyEnd]) {
			pos = valStart
			continue
		}
		if sm := authScheme.FindStringIndex(s[valStart:]); sm != nil {
			valStart += sm[1]
		}
		from, to := valueSpan(s, valStart)
		if to == from {
			pos = max(to, valStart)
			continue
		}
		b.WriteString(s[done:from])
		b.WriteString(Mask)
		done, pos = to, to
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// valueSpan returns where the value starting at s[i] is: inside its quotes when it is quoted
// ("..." '...' \"...\"; an unterminated quote runs to the end), else up to the first white
// space or , ; & ) } ] " ' ` < >.
func valueSpan(s string, i int) (from, to int) {
	if i >= len(s) {
		return i, i
	}
	if strings.HasPrefix(s[i:], `\"`) {
		if j := strings.Index(s[i+2:], `\"`); j >= 0 {
			return i + 2, i + 2 + j
		}
		return i + 2, len(s)
	}
	if q := s[i]; q == '"' || q == '\'' {
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case q:
				return i + 1, j
			}
		}
		return i + 1, len(s)
	}
	j := i
	for j < len(s) && !strings.ContainsRune(" \t\r\n,;&)}]\"'`<>", rune(s[j])) {
		j++
	}
	return i, j
}

// JSON masks the secrets in a JSON document: the value of every key that names a secret
// (IsSecretKey), at any depth, becomes "xxxxx" (null, true and false stay), and every string
// is masked with String. Keys keep their order and numbers their digits. A document with
// nothing to mask is returned as it is; one that changed comes back compact. Text that is not
// JSON is masked with String.
func JSON(raw []byte) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return raw
	}
	w := &jsonMasker{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := w.value(dec); err != nil {
		return []byte(String(string(raw)))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return []byte(String(string(raw))) // trailing data: not one JSON document
	}
	if !w.changed {
		return raw
	}
	return w.out.Bytes()
}

type jsonMasker struct {
	out     bytes.Buffer
	changed bool
}

func (w *jsonMasker) str(s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	w.out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func (w *jsonMasker) value(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v != '{' && v != '[' {
			return errors.New("redact: unexpected delimiter")
		}
		w.out.WriteByte(byte(v))
		for i := 0; dec.More(); i++ {
			if i > 0 {
				w.out.WriteByte(',')
			}
			if v == '{' {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				w.str(key)
				w.out.WriteByte(':')
				if IsSecretKey(key) {
					masked, err := w.secret(dec)
					if err != nil {
						return err
					}
					w.changed = w.changed || masked
					continue
				}
			}
			if err := w.value(dec); err != nil {
				return err
			}
		}
		end, err := dec.Token()
		if err != nil {
			return err
		}
		w.out.WriteString(string(end.(json.Delim)))
	case string:
		m := String(v)
		w.changed = w.changed || m != v
		w.str(m)
	case json.Number:
		w.out.WriteString(v.String())
	case bool:
		if v {
			w.out.WriteString("true")
		} else {
			w.out.WriteString("false")
		}
	case nil:
		w.out.WriteString("null")
	}
	return nil
}

// secret consumes the value of a secret key and writes the mask in its place, or null, true
// and false as they are. It reports whether it masked.
func (w *jsonMasker) secret(dec *json.Decoder) (bool, error) {
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false, io.ErrUnexpectedEOF
		}
		if err != nil {
			return false, err
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
		}
		if depth > 0 {
			continue
		}
		switch v := tok.(type) {
		case nil:
			w.out.WriteString("null")
			return false, nil
		case bool:
			if v {
				w.out.WriteString("true")
			} else {
				w.out.WriteString("false")
			}
			return false, nil
		}
		w.out.WriteString(`"` + Mask + `"`)
		return true, nil
	}
}
