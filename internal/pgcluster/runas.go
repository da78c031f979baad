package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverUser is the account PostgreSQL runs as when Start is called by root
// (PostgreSQL refuses to run as root).
const serverUser = "postgres"

// runner runs PostgreSQL's command-line tools, either directly or, when the
// current process is root, as the postgres user through runuser.
type runner struct {
	binDir  string
	runuser string // path of runuser; empty when running the tools directly
	uid     int    // uid of serverUser; only set when runuser != ""
	gid     int    // gid of serverUser; only set when runuser != ""
}

// newRunner returns a runner for the binaries in binDir that drops root
// privileges if needed.
func newRunner(binDir string) (*runner, error) {
	r := &runner{binDir: binDir}
	if os.Geteuid() != 0 {
		return r, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, but PostgreSQL cannot run as root and user %q does not exist: %w", serverUser, err)
	}
	if r.uid, err = strconv.Atoi(u.Uid); err != nil {
		return nil, fmt.Errorf("user %q: bad uid %q", serverUser, u.Uid)
	}
	if r.gid, err = strconv.Atoi(u.Gid); err != nil {
		return nil, fmt.Errorf("user %q: bad gid %q", serverUser, u.Gid)
	}
	if r.runuser, err = exec.LookPath("runuser"); err != nil {
		return nil, fmt.Errorf("running as root, so PostgreSQL must run as user %q, but runuser was not found: %w", serverUser, err)
	}
	return r, nil
}

// argv returns the command line that runs the executable tool with args,
// prefixed with runuser when running as root.
func (r *runner) argv(tool string, args ...string) []string {
	var argv []string
	if r.runuser != "" {
		argv = append(argv, r.runuser, "-u", serverUser, "--")
	}
	return append(append(argv, tool), args...)
}

// command returns a command running the PostgreSQL tool name (e.g. "pg_ctl")
// with args. Its working directory is "/" so that a current directory the
// postgres user cannot enter does not matter.
func (r *runner) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := r.argv(filepath.Join(r.binDir, name), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	// pg_ctl's children redirect their output to the server log, but make
	// sure a stray inherited pipe can never block us forever.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs the PostgreSQL tool name with args and returns its combined output;
// on failure the error includes that output.
func (r *runner) run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := r.command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// prepareDataDir creates dataDir if needed. As root it also hands dataDir
// (recursively, if it is not already owned by postgres) to the postgres user
// and verifies that postgres can reach it: every parent directory must be
// searchable by postgres. Parent permissions are never changed; if one is
// not searchable (e.g. /root), an error explains the problem.
func (r *runner) prepareDataDir(ctx context.Context, dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if r.runuser == "" {
		return nil
	}
	if err := r.chownTree(dataDir); err != nil {
		return fmt.Errorf("give data dir to user %q: %w", serverUser, err)
	}
	check := exec.CommandContext(ctx, r.runuser, "-u", serverUser, "--", "test", "-x", dataDir, "-a", "-w", dataDir)
	check.Dir = "/"
	if out, err := check.CombinedOutput(); err != nil {
		return fmt.Errorf("running as root, so PostgreSQL runs as user %[1]q, which cannot access data dir %[2]s "+
			"(a parent directory is probably not searchable by %[1]q; choose a data dir under e.g. /tmp or /var/lib): %[3]w %[4]s",
			serverUser, dataDir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// chownTree gives dir to the postgres user. If dir itself already belongs to
// postgres its contents are assumed to as well; otherwise the whole tree is
// chowned (this repairs a data dir created by root).
func (r *runner) chownTree(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == r.uid && int(st.Gid) == r.gid {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// The data dir is ours (just created, or created by an earlier run), not a tree a
		// hostile user can swap symlinks into; Lchown never follows a symlink anyway.
		return os.Lchown(path, r.uid, r.gid) //nolint:gosec // see above
	})
}

// writePasswordFile writes password to a new temporary file readable by the
// user the tools run as, for initdb --pwfile, so that the password never
// appears on a command line. The caller must remove the file.
func (r *runner) writePasswordFile(password string) (path string, err error) {
	if strings.ContainsAny(password, "\r\n") {
		return "", errors.New("password must not contain line breaks")
	}
	f, err := os.CreateTemp("", "pgcluster-pw-*")
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.WriteString(password + "\n"); err != nil {
		return "", err
	}
	if r.runuser != "" {
		if err := f.Chown(r.uid, r.gid); err != nil {
			return "", err
		}
	}
	return f.Name(), nil
}
