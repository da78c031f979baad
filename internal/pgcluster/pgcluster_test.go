package pgcluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/pgcluster"
)

// testSettings makes the test clusters fast; durability does not matter.
var testSettings = map[string]string{"fsync": "off", "synchronous_commit": "off"}

// newDataDir returns a not yet existing data dir path inside t.TempDir().
// As root the temp dir's parents are made searchable, because PostgreSQL
// then runs as the postgres user and t.TempDir's top dir has mode 0700.
func newDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		top := filepath.Clean(os.TempDir())
		for d := dir; d != top && d != filepath.Dir(d); d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			require.NoError(t, err)
			require.NoError(t, os.Chmod(d, fi.Mode().Perm()|0o011))
		}
	}
	return filepath.Join(dir, "data")
}

// startCluster starts a cluster and stops it at the end of the test.
func startCluster(t *testing.T, cfg pgcluster.Config) *pgcluster.Cluster {
	t.Helper()
	cfg.Logf = t.Logf
	c, err := pgcluster.Start(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Stop(context.WithoutCancel(t.Context())))
	})
	return c
}

// postmasterPID returns the PID recorded in dataDir/postmaster.pid.
func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	require.NoError(t, err)
	return pid
}

// processGone reports whether no live process has the given PID (a zombie
// waiting to be reaped counts as gone).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && strings.Contains(string(status), "State:\tZ")
}

func queryInt(t *testing.T, url, sql string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), sql).Scan(&n))
	return n
}

func exec1(t *testing.T, url string, sqls ...string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	for _, sql := range sqls {
		_, err := conn.Exec(t.Context(), sql)
		require.NoError(t, err)
	}
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	dir, err := pgcluster.FindBinDir()
	require.NoError(t, err)
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		require.FileExists(t, filepath.Join(dir, name))
	}
	require.Contains(t, pgcluster.ErrNotInstalled.Error(), "sudo apt-get install postgresql")
	require.Contains(t, pgcluster.ErrNotInstalled.Error(), "brew install postgresql@15")
}

func TestStartStopRestart(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	c := startCluster(t, pgcluster.Config{DataDir: dataDir, Settings: testSettings})
	require.Equal(t, dataDir, c.DataDir())
	require.NotZero(t, c.Port())
	require.Equal(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/app?sslmode=disable", c.Port()), c.URL("app"))

	require.Equal(t, 1, queryInt(t, c.URL("postgres"), "select 1"))
	exec1(t, c.URL("postgres"), "create table persisted (x int)", "insert into persisted values (42)")
	require.Equal(t, "fsync=off", strings.TrimSpace(showSetting(t, c.URL("postgres"), "fsync")))

	pid := postmasterPID(t, dataDir)
	require.NoError(t, c.Stop(t.Context()))
	require.NoFileExists(t, filepath.Join(dataDir, "postmaster.pid"))
	require.Eventually(t, func() bool { return processGone(pid) }, 10*time.Second, 50*time.Millisecond,
		"postmaster %d still running after Stop", pid)
	require.NoError(t, c.Stop(t.Context()), "Stop must be idempotent")
	require.DirExists(t, dataDir, "a non-ephemeral data dir must be kept")

	// Restart on the same data dir: the data is still there.
	c2 := startCluster(t, pgcluster.Config{DataDir: dataDir, Settings: testSettings})
	require.Equal(t, 42, queryInt(t, c2.URL("postgres"), "select x from persisted"))
}

func showSetting(t *testing.T, url, name string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var v string
	require.NoError(t, conn.QueryRow(t.Context(), "select current_setting($1)", name).Scan(&v))
	return name + "=" + v
}

func TestStartStopsLeftoverServer(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	// The first cluster is "forgotten", as if its process had crashed.
	c1, err := pgcluster.Start(t.Context(), pgcluster.Config{DataDir: dataDir, Settings: testSettings, Logf: t.Logf})
	require.NoError(t, err)
	pid1 := postmasterPID(t, dataDir)

	c2 := startCluster(t, pgcluster.Config{DataDir: dataDir, Settings: testSettings})
	require.NotEqual(t, pid1, postmasterPID(t, dataDir))
	require.Eventually(t, func() bool { return processGone(pid1) }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, queryInt(t, c2.URL("postgres"), "select 1"))
	_ = c1 // its server is gone; c1.Stop would stop c2's server
}

func TestFixedPort(t *testing.T) {
	t.Parallel()
	// Find a free port the same way Start does, then ask for it.
	c0 := startCluster(t, pgcluster.Config{DataDir: newDataDir(t), Settings: testSettings})
	port := c0.Port()
	require.NoError(t, c0.Stop(t.Context()))

	c := startCluster(t, pgcluster.Config{DataDir: newDataDir(t), Port: port, Settings: testSettings})
	require.Equal(t, port, c.Port())
	require.Equal(t, 1, queryInt(t, c.URL("postgres"), "select 1"))

	// The port is taken now: a second cluster on it must fail with the log.
	_, err := pgcluster.Start(t.Context(), pgcluster.Config{DataDir: newDataDir(t), Port: port, Settings: testSettings})
	require.Error(t, err)
	require.Contains(t, err.Error(), "server.log")
	require.Contains(t, err.Error(), "could not")
}

func TestPassword(t *testing.T) {
	t.Parallel()
	c := startCluster(t, pgcluster.Config{DataDir: newDataDir(t), Password: "s3cret'\"pw", Settings: testSettings})
	require.Contains(t, c.URL("postgres"), "postgres:s3cret")
	require.Equal(t, 1, queryInt(t, c.URL("postgres"), "select 1"))

	wrong := fmt.Sprintf("postgres://postgres:wrong@127.0.0.1:%d/postgres?sslmode=disable", c.Port())
	_, err := pgx.Connect(t.Context(), wrong)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "28P01", pgErr.Code, "invalid_password expected, got %v", err)

	none := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port())
	_, err = pgx.Connect(t.Context(), none)
	require.Error(t, err, "a connection without password must be rejected")
}

func TestEphemeral(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	c := startCluster(t, pgcluster.Config{DataDir: dataDir, Ephemeral: true, Settings: testSettings})
	require.Equal(t, 1, queryInt(t, c.URL("postgres"), "select 1"))
	require.NoError(t, c.Stop(t.Context()))
	require.NoDirExists(t, dataDir)
}

// TestEphemeralWatchdog crashes a process (SIGKILL) that started an ephemeral
// cluster and checks that the watchdog stops the server and removes the data.
func TestEphemeralWatchdog(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdogHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "PGCLUSTER_WATCHDOG_HELPER="+dataDir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())

	var pid int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "POSTMASTER_PID="); ok {
			pid, err = strconv.Atoi(s)
			require.NoError(t, err)
			break
		}
	}
	require.NotZero(t, pid, "helper process did not report a postmaster PID")
	err = cmd.Wait()
	require.Error(t, err, "helper must have been killed")

	require.Eventually(t, func() bool { return processGone(pid) }, 30*time.Second, 100*time.Millisecond,
		"postmaster %d survived its parent", pid)
	require.Eventually(t, func() bool {
		_, err := os.Stat(dataDir)
		return errors.Is(err, os.ErrNotExist)
	}, 30*time.Second, 100*time.Millisecond, "data dir not removed")
}

// TestWatchdogHelperProcess is the crashing process of TestEphemeralWatchdog.
func TestWatchdogHelperProcess(t *testing.T) {
	dataDir := os.Getenv("PGCLUSTER_WATCHDOG_HELPER")
	if dataDir == "" {
		t.Skip("helper process for TestEphemeralWatchdog")
	}
	_, err := pgcluster.Start(t.Context(), pgcluster.Config{DataDir: dataDir, Ephemeral: true, Settings: testSettings})
	require.NoError(t, err)
	fmt.Printf("POSTMASTER_PID=%d\n", postmasterPID(t, dataDir))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGKILL))
	select {} // not reached
}
