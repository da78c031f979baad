package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// apiDB is a test database set up as docs/api.md says: an application's role (enqueue, its own
// tasks, signals), an operator's (that, plus reading every task, cancel and retry), and a login
// role for `taskorch api` that is a member of both and has what waits need, with a token each.
type apiDB struct {
	ownerURL, loginURL string
	pool               *pgxpool.Pool // the owner's
	login, app, ops    string
	appTok, opsTok     string
}

func hexToken(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func newAPIDB(t *testing.T, url string) *apiDB {
	t.Helper()
	pool := openPool(t, url)
	suffix := hexToken(t, 4)
	d := &apiDB{ownerURL: url, pool: pool, login: "api_login_" + suffix, app: "api_app_" + suffix, ops: "api_ops_" + suffix,
		appTok: hexToken(t, 24), opsTok: hexToken(t, 24)}
	ctx := context.Background()
	id := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	for _, sql := range []string{
		fmt.Sprintf(`create role %s nologin; create role %s nologin; create role %s login password 'pw'`, id(d.app), id(d.ops), id(d.login)),
		fmt.Sprintf(`select queues.grant_enqueue(%s); select queues.grant_enqueue(%s)`, quoteLiteral(d.app), quoteLiteral(d.ops)),
		fmt.Sprintf(`grant execute on function queues.signal(text, text, jsonb) to %s, %s`, id(d.app), id(d.ops)),
		fmt.Sprintf(`grant select on queues.task to %s; grant execute on function queues.cancel_task(bigint, text), queues.retry_task(bigint) to %s`, id(d.ops), id(d.ops)),
		// The login role (docs/api.md, "Roles"): a member of each mapped role, and what the
		// start's migration check and the waits' wake-up read.
		fmt.Sprintf(`grant %s, %s to %s`, id(d.app), id(d.ops), id(d.login)),
		fmt.Sprintf(`grant usage on schema queues to %s; grant execute on function queues.applied_migrations(), queues.applied_definitions(), queues.watch_task(bigint) to %s; grant select on queues.task to %s`,
			id(d.login), id(d.login), id(d.login)),
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	t.Cleanup(func() {
		for _, r := range []string{d.login, d.app, d.ops} {
			_, _ = pool.Exec(context.Background(), "drop owned by "+id(r)+"; drop role "+id(r))
		}
	})
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	d.loginURL = fmt.Sprintf("postgres://%s:pw@%s:%d/%s?sslmode=disable", d.login, cfg.Host, cfg.Port, cfg.Database)
	return d
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// tokensEnv is TASKORCH_API_TOKENS for d's two roles.
func (d *apiDB) tokensEnv() string {
	return fmt.Sprintf("TASKORCH_API_TOKENS=%s=%s,%s=%s", d.app, d.appTok, d.ops, d.opsTok)
}

// startAPIProc starts `taskorch api` on a free port with env and returns it and its base URL
// (from the line it prints). Killed when the test ends; its log printed if the test failed.
func startAPIProc(t *testing.T, env []string, args ...string) (*proc, string) {
	t.Helper()
	cmd := exec.Command(taskorchBinary(t), append([]string{"api", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	started := p.out.lineWith("api: http://")
	require.NoError(t, cmd.Start())
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.doneOrTimeout()
		if t.Failed() {
			t.Logf("api %d log:\n%s", cmd.Process.Pid, p.out.String())
		}
	})
	select {
	case line := <-started:
		return p, strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "api: "), "/")
	case err := <-p.doneOrTimeout():
		t.Fatalf("taskorch api exited before serving: %v\n%s", err, p.out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("taskorch api did not start within 60 s:\n%s", p.out.String())
	}
	return nil, ""
}
