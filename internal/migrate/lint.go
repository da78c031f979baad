package migrate

import (
	"fmt"
	"regexp"
	"strings"
)

// The rules a file is held to when it is loaded (docs/design.md, "How the SQL is laid out"):
// a numbered migration after the set's history defines no function or view (those live in
// their files), and a function or view file defines only its object, in statements that can
// run again.

var (
	ident = `[a-z_][a-z0-9_]*`
	// A statement that defines or describes a function or view: none of them belongs in a
	// numbered migration.
	definesRoutine = regexp.MustCompile(`(?is)^(create\s+(or\s+replace\s+)?(function|procedure|view|materialized\s+view)\s+("?` + ident + `"?\.)?"?(` + ident + `)` +
		`|comment\s+on\s+(function|procedure|view)\s+(\S+)` +
		`|(grant|revoke)\s.*?\bon\s+(function|procedure|routine|all\s+functions|all\s+procedures|all\s+routines)\s+(\S+)` +
		`|alter\s+(function|procedure|routine)\s+(\S+?)\s*\([^)]*\)\s+(set|reset|security|owner|stable|volatile|immutable|strict|called|returns|parallel|cost|rows|leakproof|not|external))`)

	createFunction = regexp.MustCompile(`(?is)^create\s+(or\s+replace\s+)?function\s+(` + ident + `\.` + ident + `)\s*\(`)
	createView     = regexp.MustCompile(`(?is)^create\s+(or\s+replace\s+)?view\s+(` + ident + `\.` + ident + `)\b`)
	commentOn      = regexp.MustCompile(`(?is)^comment\s+on\s+(function|view|column)\s+(` + ident + `\.` + ident + `)[\s(.]`)
	grantOn        = regexp.MustCompile(`(?is)^(grant|revoke)\s.*?\bon\s+(function\s+|table\s+)?(` + ident + `\.` + ident + `.*?)\s+(to|from)\s`)
	alterFunction  = regexp.MustCompile(`(?is)^alter\s+function\s+(` + ident + `\.` + ident + `)\s*\([^)]*\)\s+(set|reset)\s`)
	objectName     = regexp.MustCompile(`(?i)(` + ident + `\.` + ident + `)\s*(\([^)]*\))?`)
)

// lintMigration refuses a numbered migration, past its set's history, that defines a function
// or a view, or grants, comments or alters one: that belongs in the object's file.
func lintMigration(m Migration) error {
	for _, st := range Split(m.SQL) {
		if definesRoutine.MatchString(st.SQL) {
			return fmt.Errorf("%s:%d: %q: functions and views, with their grants and comments, live in their files (functions/<schema>/<name>.sql, views/<schema>/<name>.sql) and a migration includes one with \\ir when it needs it first (docs/design.md, \"How the SQL is laid out\")",
				m.ID(), st.Line, firstLine(st.SQL))
		}
	}
	return nil
}

// lintDefinition checks that a function or view file defines its object only, with create or
// replace (it runs again at every change), and grants, revokes, comments and settings of that
// object: nothing else.
func lintDefinition(d Definition) error {
	bad := func(st Statement, why string) error {
		return fmt.Errorf("%s:%d: %q: %s", d.ID(), st.Line, firstLine(st.SQL), why)
	}
	defines := 0
	for _, st := range Split(d.SQL) {
		sql := st.SQL
		switch {
		case d.Kind == KindFunction && createFunction.MatchString(sql):
			m := createFunction.FindStringSubmatch(sql)
			if m[1] == "" {
				return bad(st, "write create or replace function: the file is applied again at every change")
			}
			if !strings.EqualFold(m[2], d.Object) {
				return bad(st, fmt.Sprintf("defines %s; this file is %s's (one file per function name)", m[2], d.Object))
			}
			defines++
		case d.Kind == KindView && createView.MatchString(sql):
			m := createView.FindStringSubmatch(sql)
			if m[1] == "" {
				return bad(st, "write create or replace view: the file is applied again at every change")
			}
			if !strings.EqualFold(m[2], d.Object) {
				return bad(st, fmt.Sprintf("defines %s; this file is %s's (one file per view)", m[2], d.Object))
			}
			defines++
		case commentOn.MatchString(sql):
			m := commentOn.FindStringSubmatch(sql)
			if !strings.EqualFold(m[2], d.Object) {
				return bad(st, fmt.Sprintf("comments on %s, not on this file's %s", m[2], d.Object))
			}
		case grantOn.MatchString(sql):
			for _, o := range objectName.FindAllStringSubmatch(grantOn.FindStringSubmatch(sql)[3], -1) {
				if !strings.EqualFold(o[1], d.Object) {
					return bad(st, fmt.Sprintf("grants on %s, not on this file's %s", o[1], d.Object))
				}
			}
		case d.Kind == KindFunction && alterFunction.MatchString(sql):
			if m := alterFunction.FindStringSubmatch(sql); !strings.EqualFold(m[1], d.Object) {
				return bad(st, fmt.Sprintf("alters %s, not this file's %s", m[1], d.Object))
			}
		default:
			return bad(st, fmt.Sprintf("a %s file holds only create or replace %s %s, its grants, revokes and comments (tables, data and drops go in a numbered migration)", d.Kind, d.Kind, d.Object))
		}
	}
	if defines == 0 {
		return fmt.Errorf("%s: defines no %s %s", d.ID(), d.Kind, d.Object)
	}
	if d.Kind == KindView && defines > 1 {
		return fmt.Errorf("%s: defines view %s %d times", d.ID(), d.Object, defines)
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
