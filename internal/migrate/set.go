package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A set's folder holds (docs/design.md, "How the SQL is laid out"):
//
//	NNNN_name.sql              numbered migrations: tables, types, indexes, constraints, data;
//	                           applied once each, in order, and never edited once released
//	functions/<schema>/<name>.sql  one file per function name (all its overloads), with its grants
//	                           and comments: re-applied whenever it changes
//	views/<schema>/<name>.sql  one file per view, likewise
//	definitions.sum            each function and view file's version and checksum
//	README.md                  (optional) what the set is
const (
	functionsDir = "functions"
	viewsDir     = "views"
	// SumsFile is the name of a set's file of definition versions.
	SumsFile = "definitions.sum"
)

// SetSpec says which set to load and how it relates to the others.
type SetSpec struct {
	// Name of the set, e.g. "core".
	Name string
	// Watch are the other sets whose migrations make this set's functions and views apply
	// again: the sets it builds on (core, for a process set), whose tables they read, and the
	// process sets built on it, whose migrations may change what they see.
	Watch []string
	// History is the last numbered migration from before the function and view files: those
	// migrations may define functions and views (they are kept as they were applied); every
	// later one must not. 0 when every migration is of the new kind.
	History int
	// Amended maps a migration's number to an edit made after databases applied it
	// (migrations.Amendment): the file's checksum now, and the one databases recorded, which
	// the loaded migration carries. A file whose checksum is not File fails to load.
	Amended map[int]Amendment
}

// Amendment is an edit of an applied migration: File is the checksum of its text now, Recorded
// the checksum databases recorded when they applied it.
type Amendment struct {
	File, Recorded string
}

// Set is a migration set as loaded: its numbered migrations and its function and view files.
type Set struct {
	SetSpec
	Migrations []Migration
	// Definitions are the function files by path, then the view files in an order in which
	// each view comes after the views it reads.
	Definitions []Definition
	// Deleted are the paths of definition files that existed once, with the version of their
	// deletion (definitions.sum keeps them): a migration dropped what they defined, and the
	// databases record the deletion at that version, so that an older binary, which still has
	// the file, leaves it alone.
	Deleted map[string]int
}

// Migration is one numbered SQL file of a migration set.
type Migration struct {
	Set      string // the migration set, e.g. "core"
	Version  int    // from the file name's number
	Name     string // the file name without number and extension
	SQL      string // the file's text
	Checksum string // hex SHA-256 of SQL; of its first text for an amended one (SetSpec.Amended)
	// Body is what is executed: SQL with each `\ir functions/...` or `\ir views/...` line
	// replaced by that file's current text (a migration that needs a function before the
	// set's definitions are applied, e.g. for a constraint or a trigger, includes it).
	Body string
}

// ID names the migration as set/NNNN_name.
func (m Migration) ID() string { return fmt.Sprintf("%s/%04d_%s", m.Set, m.Version, m.Name) }

// Kind is what a definition file defines.
type Kind string

// The kinds of definition files.
const (
	KindFunction Kind = "function"
	KindView     Kind = "view"
)

// Definition is one function or view file: the live definition of one function name (every
// overload) or one view, with its grants and comments. It is applied again whenever it changes
// and after any numbered migration of its set or of the sets it builds on.
type Definition struct {
	Set      string
	Path     string // relative to the set's folder: "functions/queues/claim_tasks.sql"
	Kind     Kind
	Object   string // schema.name, e.g. "queues.claim_tasks"
	SQL      string
	Checksum string
	// Version is the file's version in definitions.sum, which grows by one with each change: a
	// database that holds a higher version was migrated by a newer taskorch and is left alone.
	// A file changed since definitions.sum was written has the next version (Recorded false).
	Version  int
	Recorded bool
}

// ID names the definition as set/path.
func (d Definition) ID() string { return d.Set + "/" + d.Path }

var (
	fileName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)
	defPath  = regexp.MustCompile(`^(functions|views)/([a-z_][a-z0-9_]*)/([a-z_][a-z0-9_]*)\.sql$`)
	include  = regexp.MustCompile(`(?m)^\\ir[ \t]+(\S+)[ \t]*$`)
)

// Load reads one set from fsys, which is rooted at the set's folder.
func Load(fsys fs.FS, spec SetSpec) (Set, error) {
	s := Set{SetSpec: spec}
	fail := func(format string, args ...any) (Set, error) {
		return Set{}, fmt.Errorf("migration set %q: "+format, append([]any{spec.Name}, args...)...)
	}
	defs, deleted, err := loadDefinitions(fsys, spec.Name)
	if err != nil {
		return fail("%v", err)
	}
	s.Definitions, s.Deleted = defs, deleted
	byPath := map[string]Definition{}
	for _, d := range defs {
		byPath[d.Path] = d
	}

	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return fail("%v", err)
	}
	for _, e := range entries {
		switch {
		case e.IsDir() && (e.Name() == functionsDir || e.Name() == viewsDir):
			continue
		case e.IsDir():
			return fail("folder %q is neither %s/ nor %s/", e.Name(), functionsDir, viewsDir)
		case e.Name() == SumsFile || e.Name() == "README.md":
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return fail("file %q is not named NNNN_name.sql", e.Name())
		}
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return fail("%v", err)
		}
		v, _ := strconv.Atoi(m[1])
		sum := sha256.Sum256(body)
		mig := Migration{Set: spec.Name, Version: v, Name: m[2], SQL: string(body), Checksum: hex.EncodeToString(sum[:])}
		if a, ok := spec.Amended[v]; ok {
			if mig.Checksum != a.File {
				return fail("%s was amended (checksum %.12s), and has changed since (checksum %.12s): write a new migration instead",
					mig.ID(), a.File, mig.Checksum)
			}
			mig.Checksum = a.Recorded
		}
		if v > spec.History {
			if err := lintMigration(mig); err != nil {
				return Set{}, err
			}
		}
		if mig.Body, err = expandIncludes(mig, byPath); err != nil {
			return Set{}, err
		}
		s.Migrations = append(s.Migrations, mig)
	}
	slices.SortFunc(s.Migrations, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(s.Migrations); i++ {
		if s.Migrations[i].Version == s.Migrations[i-1].Version {
			return fail("two files numbered %04d", s.Migrations[i].Version)
		}
	}
	if len(s.Migrations) == 0 {
		return fail("has no migrations")
	}
	return s, nil
}

// expandIncludes replaces each \ir line of m with the file it names, applied with
// check_function_bodies off (what it calls may come later in the migration) for the rest of the
// migration's transaction.
func expandIncludes(m Migration, defs map[string]Definition) (string, error) {
	var err error
	body := include.ReplaceAllStringFunc(m.SQL, func(line string) string {
		p := include.FindStringSubmatch(line)[1]
		d, ok := defs[p]
		if !ok {
			err = errors.Join(err, fmt.Errorf("%s: \\ir %s: no such function or view file in the set (paths are relative to the set's folder)", m.ID(), p))
			return line
		}
		return fmt.Sprintf("-- %s (%s, included)\nset local check_function_bodies = off;\n%s", line, d.ID(), strings.TrimRight(d.SQL, "\n"))
	})
	return body, err
}

// loadDefinitions reads the function and view files and definitions.sum.
func loadDefinitions(fsys fs.FS, set string) ([]Definition, map[string]int, error) {
	sums, err := readSums(fsys)
	if err != nil {
		return nil, nil, err
	}
	var funcs, views []Definition
	for _, dir := range []string{functionsDir, viewsDir} {
		err := fs.WalkDir(fsys, dir, func(p string, e fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return fs.SkipDir
			}
			if err != nil || e.IsDir() {
				return err
			}
			m := defPath.FindStringSubmatch(p)
			if m == nil || m[1] != dir {
				return fmt.Errorf("file %q is not named %s/<schema>/<name>.sql", p, dir)
			}
			body, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(body)
			d := Definition{Set: set, Path: p, Kind: KindFunction, Object: m[2] + "." + m[3], SQL: string(body),
				Checksum: hex.EncodeToString(sum[:]), Version: 1}
			if dir == viewsDir {
				d.Kind = KindView
			}
			if e, ok := sums.entries[p]; ok {
				d.Version, d.Recorded = e.version, e.checksum == d.Checksum
				if !d.Recorded {
					d.Version++
				}
			}
			if err := lintDefinition(d); err != nil {
				return err
			}
			if d.Kind == KindView {
				views = append(views, d)
			} else {
				funcs = append(funcs, d)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	deleted := map[string]int{}
	for p, e := range sums.entries {
		if e.checksum == deletedMark {
			deleted[p] = e.version
		}
	}
	for _, d := range append(slices.Clone(funcs), views...) {
		delete(deleted, d.Path) // a file deleted once and written again: the next version
	}
	return append(funcs, orderViews(views)...), deleted, nil
}

// orderViews sorts views so that each comes after the views of the set its text names, path
// order otherwise (a view's definition needs the views it reads to exist).
func orderViews(views []Definition) []Definition {
	slices.SortFunc(views, func(a, b Definition) int { return strings.Compare(a.Path, b.Path) })
	var out []Definition
	done := map[string]bool{}
	var visit func(d Definition, seen map[string]bool)
	visit = func(d Definition, seen map[string]bool) {
		if done[d.Path] || seen[d.Path] {
			return
		}
		seen[d.Path] = true
		for _, o := range views {
			if o.Path != d.Path && mentions(d.SQL, o.Object) {
				visit(o, seen)
			}
		}
		done[d.Path] = true
		out = append(out, d)
	}
	for _, d := range views {
		visit(d, map[string]bool{})
	}
	return out
}

// mentions reports whether sql names object (schema.name) as a whole word.
func mentions(sql, object string) bool {
	for i := 0; ; {
		j := strings.Index(sql[i:], object)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(object)
		if (j == 0 || !isIdentByte(sql[j-1])) && (end == len(sql) || !isIdentByte(sql[end])) {
			return true
		}
		i = end
	}
}

// LoadFS is Load for a set whose folder is path.Join(dir) inside fsys.
func LoadFS(fsys fs.FS, dir string, spec SetSpec) (Set, error) {
	sub, err := fs.Sub(fsys, path.Clean(dir))
	if err != nil {
		return Set{}, err
	}
	return Load(sub, spec)
}
