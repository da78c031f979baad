package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Token is one bearer token and the role its holder acts as.
type Token struct {
	Role  string
	Value string
}

// minTokenLen is the shortest token TokenAuth accepts.
const minTokenLen = 16

// TokenAuth returns a Config.Authenticate that reads "Authorization: Bearer <token>" and
// answers the role of the token it is. The token is compared with every configured token,
// each in constant time (of their SHA-256: lengths leak nothing), whichever matches. Several
// tokens may map to one role (a rotation: add the new token, hand it out, remove the old one).
// It refuses an empty list, a token shorter than 16 characters, a token given twice and a role
// that is not a plain identifier; its errors never quote a token.
func TokenAuth(tokens []Token) (func(r *http.Request) (string, bool), error) {
	if len(tokens) == 0 {
		return nil, errors.New("no token configured")
	}
	type entry struct {
		role string
		sum  [32]byte
	}
	entries := make([]entry, 0, len(tokens))
	seen := map[[32]byte]bool{}
	for i, t := range tokens {
		if err := ValidRole(t.Role); err != nil {
			return nil, fmt.Errorf("token %d: %w", i+1, err)
		}
		if len(t.Value) < minTokenLen {
			return nil, fmt.Errorf("token %d (role %s) is shorter than %d characters", i+1, t.Role, minTokenLen)
		}
		sum := sha256.Sum256([]byte(t.Value))
		if seen[sum] {
			return nil, fmt.Errorf("token %d (role %s) is given twice: give each role its own", i+1, t.Role)
		}
		seen[sum] = true
		entries = append(entries, entry{role: t.Role, sum: sum})
	}
	return func(r *http.Request) (string, bool) {
		scheme, cred, found := strings.Cut(r.Header.Get("Authorization"), " ")
		if !found || !strings.EqualFold(scheme, "Bearer") {
			return "", false
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(cred)))
		role, ok := "", false
		for _, e := range entries {
			if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 && !ok {
				role, ok = e.role, true
			}
		}
		return role, ok
	}, nil
}

// ParseTokens reads TASKORCH_API_TOKENS's form: "ROLE=TOKEN" pairs separated by commas or
// newlines (blank entries skipped). Its errors name the entry by its position, never its token.
func ParseTokens(s string) ([]Token, error) {
	var out []Token
	for i, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		role, tok, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(role) == "" || strings.TrimSpace(tok) == "" {
			return nil, fmt.Errorf("entry %d: want ROLE=TOKEN", i+1)
		}
		out = append(out, Token{Role: strings.TrimSpace(role), Value: strings.TrimSpace(tok)})
	}
	return out, nil
}
