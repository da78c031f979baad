package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNotInstalled is returned (wrapped) by FindBinDir and Start when the
// PostgreSQL server binaries cannot be found on this machine. Test for it with
// errors.Is.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; " +
	"install PostgreSQL: on Debian/Ubuntu run `sudo apt-get install postgresql`, " +
	"on macOS run `brew install postgresql@15`")

// serverBinaries are the executables a bin dir must contain to be usable.
var serverBinaries = []string{"initdb", "pg_ctl", "postgres"}

// versionedGlobs are the well-known install locations of versioned
// PostgreSQL packages: Debian/Ubuntu's postgresql-NN packages and the
// keg-only Homebrew formulae (which are not linked onto PATH).
var versionedGlobs = []string{
	"/usr/lib/postgresql/*/bin",
	"/opt/homebrew/opt/postgresql@*/bin",
	"/usr/local/opt/postgresql@*/bin",
}

// FindBinDir returns the directory holding the PostgreSQL server binaries
// initdb, pg_ctl and postgres. It looks, in order:
//
//  1. for initdb on PATH (symlinks are resolved, so /usr/local/bin/initdb
//     pointing into /usr/lib/postgresql/15/bin yields the latter);
//  2. at the output of `pg_config --bindir`;
//  3. at the newest of /usr/lib/postgresql/*/bin (Debian, Ubuntu) and the
//     Homebrew locations /opt/homebrew/opt/postgresql@*/bin and
//     /usr/local/opt/postgresql@*/bin.
//
// A candidate is only accepted if it contains all three binaries. If none is
// found the error wraps ErrNotInstalled, whose message says how to install
// PostgreSQL.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); hasServerBinaries(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(p, "--bindir").Output(); err == nil {
			if dir := strings.TrimSpace(string(out)); dir != "" && hasServerBinaries(dir) {
				return dir, nil
			}
		}
	}
	var candidates []string
	for _, g := range versionedGlobs {
		m, _ := filepath.Glob(g) // only fails on a malformed pattern
		candidates = append(candidates, m...)
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		return versionLess(versionOf(candidates[j]), versionOf(candidates[i]))
	})
	for _, dir := range candidates {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w (searched PATH, `pg_config --bindir`, %s)",
		ErrNotInstalled, strings.Join(versionedGlobs, ", "))
}

// hasServerBinaries reports whether dir contains executable initdb, pg_ctl and
// postgres files.
func hasServerBinaries(dir string) bool {
	for _, name := range serverBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// versionOf extracts the version numbers from a versioned install path such
// as /usr/lib/postgresql/15/bin or /opt/homebrew/opt/postgresql@16/bin.
func versionOf(binDir string) []int {
	name := filepath.Base(filepath.Dir(binDir))
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		name = name[i+1:]
	}
	var v []int
	for _, part := range strings.Split(name, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			break
		}
		v = append(v, n)
	}
	return v
}

// versionLess reports whether version a sorts before version b.
func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}
