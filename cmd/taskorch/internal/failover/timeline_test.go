package failover_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/cmd/taskorch/internal/failover"
	"github.com/taskorch/taskorch/internal/pgcluster"
	"github.com/taskorch/taskorch/internal/testing/replicatest"
)

// connect opens one connection with g installed, to the first host of ports that is writable
// and not refused by g, and returns the port it reached.
func connect(t *testing.T, g *failover.Guard, ports ...int) (int, error) {
	t.Helper()
	url := "postgres://probe@"
	for i, p := range ports {
		if i > 0 {
			url += ","
		}
		url += fmt.Sprintf("127.0.0.1:%d", p)
	}
	cfg, err := pgconn.ParseConfig(url + "/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=5")
	require.NoError(t, err)
	require.True(t, g.Install(cfg))
	conn, err := pgconn.ConnectConfig(t.Context(), cfg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	return conn.Conn().RemoteAddr().(*net.TCPAddr).Port, nil
}

// Both servers accept writes once the standby is promoted while the old primary still runs:
// the split brain a revived primary makes. A guard that has connected to the promoted server
// refuses the old one, whatever the URL's order; a guard that has seen neither cannot tell.
func TestGuardRefusesFormerPrimary(t *testing.T) {
	t.Parallel()
	pair := replicatest.Start(t, replicatest.Options{
		// An unprivileged role, as a worker's: the timeline query needs no grant.
		Setup: func(ctx context.Context, primary *pgcluster.Cluster) error {
			conn, err := pgconn.Connect(ctx, primary.URL("postgres"))
			if err != nil {
				return err
			}
			defer func() { _ = conn.Close(ctx) }()
			_, err = conn.Exec(ctx, "create role probe login").ReadAll()
			return err
		},
	})
	primary, standby := pair.Primary.Port(), pair.Standby.Port()
	g := failover.NewGuard(nil)

	port, err := connect(t, g, standby, primary)
	require.NoError(t, err)
	require.Equal(t, primary, port, "the standby is refused by target_session_attrs")
	require.EqualValues(t, 1, g.Newest())

	require.NoError(t, pair.Standby.Promote(t.Context()))
	port, err = connect(t, g, standby, primary)
	require.NoError(t, err)
	require.Equal(t, standby, port)
	require.EqualValues(t, 2, g.Newest(), "the promoted standby writes on the next timeline")

	port, err = connect(t, g, primary, standby)
	require.NoError(t, err)
	require.Equal(t, standby, port, "the former primary, listed first, is refused")
	_, err = connect(t, g, primary)
	var former *failover.FormerPrimaryError
	require.True(t, errors.As(err, &former), "only the former primary listed: %v", err)
	require.Equal(t, failover.FormerPrimaryError{Timeline: 1, Newest: 2}, *former)
	require.ErrorContains(t, err, "a former primary")

	// A process that never saw the new timeline takes the first writable host.
	port, err = connect(t, failover.NewGuard(nil), primary, standby)
	require.NoError(t, err)
	require.Equal(t, primary, port, "documented: a fresh process cannot tell")
}

func TestGuardOnlyForWritableURLs(t *testing.T) {
	t.Parallel()
	cfg, err := pgconn.ParseConfig("postgres://u@127.0.0.1:1,127.0.0.1:2/db")
	require.NoError(t, err)
	require.False(t, failover.NewGuard(nil).Install(cfg), "a URL that may point at a standby on purpose")
	require.Nil(t, cfg.ValidateConnect)
	cfg, err = pgconn.ParseConfig("postgres://u@127.0.0.1:1/db?target_session_attrs=primary")
	require.NoError(t, err)
	require.True(t, failover.NewGuard(nil).Install(cfg))
}
