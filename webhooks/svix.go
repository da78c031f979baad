package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// verifySvix checks a Svix-signed request as Svix documents it ("Verifying Webhooks Manually"):
// the signature is base64(HMAC-SHA256(key, svix-id + "." + svix-timestamp + "." + body)), key
// being the secret's base64 after "whsec_"; svix-signature holds space-separated "v1,<base64>"
// entries, any of which may match (several during a secret rotation), compared in constant
// time; and the timestamp (Unix seconds) must be within tolerance of now, either way, or the
// request is refused as replayed.
func verifySvix(key []byte, header http.Header, body []byte, now time.Time, tolerance time.Duration) *refusal {
	id, ts, sigs := header.Get("svix-id"), header.Get("svix-timestamp"), header.Get("svix-signature")
	var missing []string
	for _, h := range []struct{ name, v string }{{"svix-id", id}, {"svix-timestamp", ts}, {"svix-signature", sigs}} {
		if h.v == "" {
			missing = append(missing, h.name)
		}
	}
	if len(missing) > 0 {
		return refuse(http.StatusUnauthorized, "unsigned: no %s header", strings.Join(missing, ", "))
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	matched := false
	for _, entry := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			matched = true
		}
	}
	if !matched {
		return refuse(http.StatusUnauthorized, "the svix-signature does not match the body (signed with another secret, or altered)")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return refuse(http.StatusUnauthorized, "svix-timestamp %q is not Unix seconds", ts)
	}
	age := now.Sub(time.Unix(sec, 0))
	if age > tolerance {
		return refuse(http.StatusUnauthorized, "svix-timestamp is %s old, outside the %s window: replayed or late", age.Round(time.Second), tolerance)
	}
	if age < -tolerance {
		return refuse(http.StatusUnauthorized, "svix-timestamp is %s ahead, outside the %s window", (-age).Round(time.Second), tolerance)
	}
	return nil
}
