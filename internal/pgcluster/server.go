package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// logFileName is the name of the server log inside the data directory.
const logFileName = "server.log"

// maxSocketPath is the longest Unix socket path the kernel accepts
// (sizeof(sun_path) - 1 on Linux; macOS allows even less, 103).
const maxSocketPath = 103

// errPortInUse marks a start failure caused by the port being taken.
var errPortInUse = errors.New("port already in use")

// initdb creates a new cluster in c.dataDir.
func (c *Cluster) initdb(ctx context.Context, cfg Config) error {
	args := []string{"-D", c.dataDir, "-U", "postgres", "--encoding=UTF8", "--locale=C"}
	if cfg.Password == "" {
		args = append(args, "--auth=trust")
	} else {
		pwfile, err := c.r.writePasswordFile(cfg.Password)
		if err != nil {
			return fmt.Errorf("write password file: %w", err)
		}
		defer func() { _ = os.Remove(pwfile) }()
		args = append(args, "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "--pwfile="+pwfile)
	}
	if isOff(cfg.Settings["fsync"]) {
		args = append(args, "--no-sync")
	}
	c.logf("pgcluster: initialising cluster in %s", c.dataDir)
	if _, err := c.r.run(ctx, "initdb", args...); err != nil {
		return err
	}
	return nil
}

// stopLeftover stops a server still running on c.dataDir, typically left
// behind by a previous process that crashed before calling Stop.
func (c *Cluster) stopLeftover(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); err != nil {
		return nil // no postmaster.pid: nothing can be running
	}
	running, err := c.running(ctx)
	if err != nil || !running {
		return err
	}
	c.logf("pgcluster: a server is still running on %s (left over by an earlier process); stopping it", c.dataDir)
	if _, err := c.r.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "fast", "-w", "-t", "60"); err != nil {
		// A postmaster that died meanwhile (killed, its pid seen alive a moment before) makes
		// pg_ctl say "server does not shut down"; it left only its pid file, which the server
		// that starts next replaces.
		if still, serr := c.running(ctx); serr == nil && !still {
			return nil
		}
		return fmt.Errorf("stop leftover server: %w", err)
	}
	return nil
}

// running reports whether a server is running on c.dataDir, according to
// `pg_ctl status`.
func (c *Cluster) running(ctx context.Context) (bool, error) {
	out, err := c.r.command(ctx, "pg_ctl", "status", "-D", c.dataDir).CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exitErr) && (exitErr.ExitCode() == 3 || exitErr.ExitCode() == 4):
		// 3: not running; 4: no accessible data directory.
		return false, nil
	default:
		return false, fmt.Errorf("pg_ctl status: %w: %s", err, bytes.TrimSpace(out))
	}
}

// pgCtlStart starts the server on port with `pg_ctl start -w`. On failure the
// error includes the part of the server log written by this attempt, and
// wraps errPortInUse if the port was taken.
func (c *Cluster) pgCtlStart(ctx context.Context, port int, settings map[string]string) error {
	logPath := c.LogFile()
	var offset int64
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size()
	}
	opts := []string{
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(port),
		"-c", "unix_socket_directories=" + socketDir(c.dataDir, port),
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		opts = append(opts, "-c", name+"="+settings[name])
	}
	// pg_ctl hands -o to a shell, so every option is quoted.
	quoted := make([]string, len(opts))
	for i, o := range opts {
		quoted[i] = shellQuote(o)
	}
	c.logf("pgcluster: starting server on 127.0.0.1:%d", port)
	_, err := c.r.run(ctx, "pg_ctl", "start", "-D", c.dataDir, "-w", "-t", "60",
		"-l", logPath, "-o", strings.Join(quoted, " "))
	if err == nil {
		return nil
	}
	tail := logTail(logPath, offset)
	err = fmt.Errorf("start server on port %d: %w\n--- tail of %s ---\n%s", port, err, logPath, tail)
	if strings.Contains(tail, "could not bind") || strings.Contains(tail, "already in use") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

// socketDir returns the directory for the server's Unix socket: the data
// directory, or "" (no Unix socket) if the socket path would be too long or
// the path needs quoting in unix_socket_directories.
func socketDir(dataDir string, port int) string {
	sock := filepath.Join(dataDir, ".s.PGSQL."+strconv.Itoa(port)+".lock")
	if len(sock) > maxSocketPath || strings.ContainsAny(dataDir, ",\"' \t\n\\") {
		return ""
	}
	return dataDir
}

// logTail returns the last lines of the file at path, reading no further back
// than offset.
func logTail(path string, offset int64) string {
	const maxBytes, maxLines = 16 << 10, 40
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read server log: %v)", err)
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err == nil && fi.Size()-offset > maxBytes {
		offset = fi.Size() - maxBytes
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Sprintf("(cannot read server log: %v)", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read server log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(server log is empty)"
	}
	return strings.Join(lines, "\n")
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	return port, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// validSettingName reports whether name looks like a server setting name
// (including custom "prefix.name" settings).
func validSettingName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		valid := r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !valid {
			return false
		}
	}
	return true
}

// isOff reports whether a boolean server setting value means false.
func isOff(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "off", "false", "no", "0":
		return true
	}
	return false
}
