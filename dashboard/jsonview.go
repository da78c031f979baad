package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/taskorch/taskorch/internal/redact"
)

// jsonToken is one piece of pretty-printed JSON: Class names its kind for the stylesheet
// (key, str, num, bool, null, mask; empty for punctuation and white space). The template
// writes Text as text, so a payload cannot inject markup.
type jsonToken struct {
	Class string
	Text  string
}

// maxJSONView bounds how much of one document a page shows.
const maxJSONView = 256 << 10

// masked replaces the value of a key that names a secret (redact.IsSecretKey).
var masked = quoteJSON(redact.Mask)

// prettyJSON indents a JSON document, keeping its keys in order, masking secrets as
// redact.JSON does (the values of secret keys, URL passwords and key=value secrets in strings),
// and splits it into tokens for highlighting. A document that does not parse is shown
// as text.
func prettyJSON(v any) []jsonToken {
	raw := asBytes(v)
	if len(raw) == 0 {
		return []jsonToken{{Class: "null", Text: "null"}}
	}
	p := &jsonPrinter{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := p.value(dec, 0); err != nil && !errors.Is(err, errJSONTooBig) {
		return []jsonToken{{Text: redact.String(string(raw))}}
	}
	if p.size > maxJSONView {
		p.out = append(p.out, jsonToken{Class: "mask", Text: "\n… (truncated)"})
	}
	return p.out
}

// compactJSON is a one-line form of a JSON document, secrets masked, cut to n runes.
func compactJSON(n int, v any) string {
	var b strings.Builder
	for _, t := range prettyJSONCompact(asBytes(v)) {
		b.WriteString(t.Text)
		if b.Len() > n*4 {
			break
		}
	}
	return truncate(n, b.String())
}

func prettyJSONCompact(raw []byte) []jsonToken {
	if len(raw) == 0 {
		return nil
	}
	p := &jsonPrinter{compact: true}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := p.value(dec, 0); err != nil && !errors.Is(err, errJSONTooBig) {
		return []jsonToken{{Text: redact.String(string(raw))}}
	}
	return p.out
}

func asBytes(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case json.RawMessage:
		return x
	case string:
		return []byte(x)
	case nil:
		return nil
	default:
		b, _ := json.Marshal(x)
		return b
	}
}

var errJSONTooBig = errors.New("json too big to show")

type jsonPrinter struct {
	out     []jsonToken
	size    int
	compact bool
}

func (p *jsonPrinter) emit(class, text string) error {
	p.out = append(p.out, jsonToken{Class: class, Text: text})
	p.size += len(text)
	if p.size > maxJSONView {
		return errJSONTooBig
	}
	return nil
}

func (p *jsonPrinter) newline(depth int) error {
	if p.compact {
		return nil
	}
	return p.emit("", "\n"+strings.Repeat("  ", depth))
}

func quoteJSON(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the template escapes; keep <, > and & readable
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func (p *jsonPrinter) value(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		closer := "}"
		if v == '[' {
			closer = "]"
		}
		if err := p.emit("", string(v)); err != nil {
			return err
		}
		first := true
		for dec.More() {
			sep := ","
			if first {
				sep = ""
			}
			if sep != "" {
				if err := p.emit("", sep); err != nil {
					return err
				}
			}
			if err := p.newline(depth + 1); err != nil {
				return err
			}
			first = false
			if v == '{' {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				colon := ": "
				if p.compact {
					colon = ":"
				}
				if err := p.emit("key", quoteJSON(key)); err != nil {
					return err
				}
				if err := p.emit("", colon); err != nil {
					return err
				}
				if redact.IsSecretKey(key) {
					if err := p.secret(dec); err != nil {
						return err
					}
					continue
				}
			}
			if err := p.value(dec, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		if !first {
			if err := p.newline(depth); err != nil {
				return err
			}
		}
		return p.emit("", closer)
	case string:
		if m := redact.String(v); m != v {
			return p.emit("mask", quoteJSON(m))
		}
		return p.emit("str", quoteJSON(v))
	case json.Number:
		return p.emit("num", v.String())
	case bool:
		if v {
			return p.emit("bool", "true")
		}
		return p.emit("bool", "false")
	case nil:
		return p.emit("null", "null")
	}
	return errors.New("unexpected JSON token")
}

// secret consumes the value of a secret key and shows the mask in its place; null, true and
// false show as they are (redact.JSON's rule).
func (p *jsonPrinter) secret(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
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
			return p.emit("null", "null")
		case bool:
			return p.emit("bool", strconv.FormatBool(v))
		}
		return p.emit("mask", masked)
	}
}
