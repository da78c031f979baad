package maintenance

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// What the session path costs the database, per call, against a heartbeat (the heartbeat
// path's unit of work), with a fleet of n workers each holding its session: the leader's check
// (queues.reap_lost_sessions, 4 a second), a follower's attempt at the lease
// (queues.acquire_leadership while the leader lives, 2 a second per follower), and the pid
// check on each session (every HeartbeatInterval). docs/benchmarks.md, "Crashed workers and the
// cost of sessions":
//
//	go run ./internal/cmd/withpg -- go test -run '^$' -bench BenchmarkSessionPath -benchtime 3000x ./internal/maintenance/
func BenchmarkSessionPath(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			ctx := b.Context()
			pool := dbtest.NewDBWith(b, dbtest.DBOptions{MaxConns: 4})
			cfg := pool.Config().ConnConfig.Copy()
			for i := range n {
				c, err := pgx.ConnectConfig(ctx, cfg)
				require.NoError(b, err)
				b.Cleanup(func() { _ = c.Close(ctx) })
				_, err = registerInstance(b, c, fmt.Sprintf("w%d", i), "p", true, time.Minute)
				require.NoError(b, err)
			}
			term := scalar[int64](b, pool, `select queues.acquire_leadership('w0', interval '1 hour', 'p')`)
			for _, c := range []struct {
				name string
				sql  string
				args []any
			}{
				{"heartbeat", `select queues.heartbeat_worker_state('w1', 'p')`, nil},
				{"leader-check", `select count(*) from queues.reap_lost_sessions(interval '1 second', $1)`, []any{term}},
				{"follower-poll", `select queues.acquire_leadership('w1', interval '15 seconds', 'p')`, nil},
				{"session-pid-check", `select pg_backend_pid()`, nil},
			} {
				if n == 1 && c.name != "leader-check" {
					continue // w1 does not exist
				}
				b.Run(c.name, func(b *testing.B) {
					conn, err := pool.Acquire(ctx)
					require.NoError(b, err)
					defer conn.Release()
					for b.Loop() {
						_, err := conn.Exec(ctx, c.sql, c.args...)
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
