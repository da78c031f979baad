package webhooks_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/webhooks"
)

// BenchmarkResendBounced measures one verified email.bounced callback through a real HTTP server
// and PostgreSQL: signature check, fact, signal, answer.
func BenchmarkResendBounced(b *testing.B) {
	s := newServer(b, webhooks.Config{ResendSecret: testSecret})
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("re_bench_%d", i)
		sentEmail(b, s.pool, ids[i])
	}
	b.ResetTimer()
	for i := range b.N {
		got := s.resend(b, fmt.Sprintf("msg_%d", i), resendEvent("email.bounced", ids[i], `, "bounce": {"message": "no such user"}`))
		if got.status != 200 || got.body != "recorded" {
			b.Fatalf("%d: %+v", i, got)
		}
	}
	b.StopTimer()
	require.Equal(b, int64(b.N), scalar[int64](b, s.pool, `select count(*) from comms.send_email_attempt_bounced`))
}
