package dbtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestOwnerOf(t *testing.T) {
	t.Parallel()
	key, ok := ownerOf("taskorch_t_0000abcd_12")
	require.True(t, ok)
	require.Equal(t, uint32(0xabcd), key)
	key, ok = ownerOf("taskorch_t_deadbeef_shared")
	require.True(t, ok)
	require.Equal(t, uint32(0xdeadbeef), key)
	for _, bad := range []string{"taskorch_t_", "taskorch_t_xyz", "taskorch_t_0000abcd", "taskorch_t_nothexxx_1"} {
		_, ok := ownerOf(bad)
		require.False(t, ok, bad)
	}
}

// adminConn connects to the admin database of the test server.
func adminConn(t *testing.T, h *harness) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), h.URL(adminDB))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(t.Context())) })
	return conn
}

func exists(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, conn.QueryRow(t.Context(),
		"select exists (select from pg_database where datname = $1)", name).Scan(&ok))
	return ok
}

func TestDropStale(t *testing.T) {
	t.Parallel()
	h := setUp(t)
	conn := adminConn(t, h)
	liveKey, deadKey := h.key^0x5a5a5a5a, h.key^0xa5a5a5a5
	// A live owner: another connection holds its owner lock.
	live := adminConn(t, h)
	_, err := live.Exec(t.Context(), "select pg_advisory_lock($1, $2)", lockSpace, int32(liveKey))
	require.NoError(t, err)
	liveDB := fmt.Sprintf("%s%08x_1", dbPrefix, liveKey)
	deadDB := fmt.Sprintf("%s%08x_1", dbPrefix, deadKey)
	for _, name := range []string{liveDB, deadDB} {
		_, err := conn.Exec(t.Context(), "create database "+quote(name))
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.WithoutCancel(t.Context()), "drop database if exists "+quote(liveDB))
	})

	h.dropStale(t.Context())
	require.False(t, exists(t, conn, deadDB), "database of a dead owner must be dropped")
	require.True(t, exists(t, conn, liveDB), "database of a live owner must be kept")
}

func TestIncompleteTemplateRebuilt(t *testing.T) {
	t.Parallel()
	h := setUp(t)
	conn := adminConn(t, h)
	fingerprint := fmt.Sprintf("incomplete template test %08x", h.key)
	h2 := newHarness(Options{
		Fingerprint: fingerprint,
		Migrate: func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "create table rebuilt (id int)")
			return err
		},
	})
	h2.base = h.base
	h2.admin = h.admin
	h2.template = templateName(fingerprint)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		_, _ = conn.Exec(ctx, "alter database "+quote(h2.template)+" is_template false")
		_, _ = conn.Exec(ctx, "drop database if exists "+quote(h2.template))
	})

	// A template left half-built by a crash: no completion comment.
	_, err := conn.Exec(t.Context(), "create database "+quote(h2.template))
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "alter database "+quote(h2.template)+" is_template true")
	require.NoError(t, err)

	require.NoError(t, h2.ensureTemplate(t.Context()))
	var comment string
	require.NoError(t, conn.QueryRow(t.Context(),
		"select shobj_description(oid, 'pg_database') from pg_database where datname = $1",
		h2.template).Scan(&comment))
	require.Contains(t, comment, "taskorch dbtest template")

	// The rebuilt template is migrated, and a second call reuses it.
	require.NoError(t, h2.ensureTemplate(t.Context()))
	clone := fmt.Sprintf("%s%08x_rebuilt", dbPrefix, h.key)
	require.NoError(t, h2.createDB(t.Context(), clone, ""))
	t.Cleanup(func() { _ = h2.dropDB(context.WithoutCancel(t.Context()), clone) })
	c, err := pgx.Connect(t.Context(), h.URL(clone))
	require.NoError(t, err)
	defer c.Close(context.WithoutCancel(t.Context()))
	_, err = c.Exec(t.Context(), "select from rebuilt")
	require.NoError(t, err)
}
