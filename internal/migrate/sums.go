package migrate

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// definitions.sum lists each function and view file of a set with its version and checksum:
//
//	functions/queues/claim_tasks.sql 3 9f86d081884c7d65...
//
// A file's version grows by one each time its text changes (UpdateSums, which `make schema`
// runs, writes it). A database records the version it applied, so a taskorch binary can tell a
// definition older than its own (re-applied) from a newer one (left alone: an older worker must
// not undo what a newer one migrated). A deleted file keeps its line, at the next version, with
// "deleted" for a checksum: the databases record the deletion at that version, so that an older
// binary, which still has the file, does not create again what a migration dropped.

const (
	deletedMark = "deleted"
	sumsHeader  = `# Versions of this set's function and view files: path, version, SHA-256 of the file.
# Written by ` + "`make schema`" + ` (internal/migrate.UpdateSums): a file's version grows by one with each
# change; a database that applied a higher version is left alone by an older taskorch.
`
)

type sumEntry struct {
	version  int
	checksum string
}

type sums struct {
	entries map[string]sumEntry
}

func readSums(fsys fs.FS) (sums, error) {
	s := sums{entries: map[string]sumEntry{}}
	f, err := fsys.Open(SumsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.Atoi(fieldOr(fields, 1))
		if len(fields) != 3 || err != nil || v < 1 || (fields[2] != deletedMark && len(fields[2]) != 64) {
			return s, fmt.Errorf("%s:%d: want <path> <version> <sha256|deleted>, got %q", SumsFile, n, line)
		}
		if _, dup := s.entries[fields[0]]; dup {
			return s, fmt.Errorf("%s:%d: %s listed twice", SumsFile, n, fields[0])
		}
		s.entries[fields[0]] = sumEntry{version: v, checksum: fields[2]}
	}
	return s, sc.Err()
}

func fieldOr(fields []string, i int) string {
	if i < len(fields) {
		return fields[i]
	}
	return ""
}

// SumsCurrent returns an error naming every definition of s whose file changed since
// definitions.sum was written, or that it lacks ("run make schema").
func SumsCurrent(s Set) error {
	var stale []string
	for _, d := range s.Definitions {
		if !d.Recorded {
			stale = append(stale, d.Path)
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("migration set %q: %s does not record the current text of %s: run make schema (it bumps their versions) and commit %s",
			s.Name, SumsFile, strings.Join(stale, ", "), SumsFile)
	}
	return nil
}

// UpdateSums rewrites dir/definitions.sum for the function and view files under dir (a set's
// folder on disk): a new file gets version 1, a changed one its version plus one, a deleted one
// its version plus one, marked deleted (and one written again after that, the next). It reports
// whether the file changed.
func UpdateSums(dir string) (bool, error) {
	fsys := os.DirFS(dir)
	old, err := readSums(fsys)
	if err != nil {
		return false, err
	}
	next := map[string]sumEntry{}
	for _, sub := range []string{functionsDir, viewsDir} {
		err := fs.WalkDir(fsys, sub, func(p string, e fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && p == sub {
				return fs.SkipDir
			}
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".sql") {
				return err
			}
			body, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(body)
			sum := hex.EncodeToString(h[:])
			e0, ok := old.entries[p]
			switch {
			case !ok:
				next[p] = sumEntry{1, sum}
			case e0.checksum == sum:
				next[p] = e0
			default:
				next[p] = sumEntry{e0.version + 1, sum}
			}
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	for p, e := range old.entries {
		switch _, ok := next[p]; {
		case ok:
		case e.checksum == deletedMark:
			next[p] = e
		default:
			next[p] = sumEntry{e.version + 1, deletedMark}
		}
	}
	paths := make([]string, 0, len(next))
	for p := range next {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var b strings.Builder
	b.WriteString(sumsHeader)
	for _, p := range paths {
		fmt.Fprintf(&b, "%s %d %s\n", p, next[p].version, next[p].checksum)
	}
	file := filepath.Join(dir, SumsFile)
	was, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if string(was) == b.String() {
		return false, nil
	}
	return true, os.WriteFile(file, []byte(b.String()), 0o644) //nolint:gosec // a checked-in source file
}
