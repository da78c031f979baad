package migrate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

const fnF = `-- f says hello.
create or replace function app.f() returns text language sql as $$ select 'hello; world' $$;
revoke all on function app.f() from public;
`

func TestLoadOrdersAndChecksums(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"0002_second.sql":          {Data: []byte("select 2;")},
		"0001_first.sql":           {Data: []byte("select 1;")},
		"functions/app/f.sql":      {Data: []byte(fnF)},
		"views/app/b.sql":          {Data: []byte("create or replace view app.b as select * from app.a;\n")},
		"views/app/a.sql":          {Data: []byte("create or replace view app.a as select app.f() as x;\ncomment on view app.a is 'a';\n")},
		"views/app/c.sql":          {Data: []byte("create or replace view app.c as select 1 as one;\ngrant select on app.c to someone;\n")},
		"README.md":                {Data: []byte("about the set")},
		"definitions.sum":          {Data: []byte("functions/app/f.sql 3 " + sha(fnF) + "\nviews/app/gone.sql 2 deleted\n")},
		"views/app/bb_reads_b.sql": {Data: []byte("create or replace view app.bb_reads_b as select * from app.b;\n")},
	}
	s, err := Load(fsys, SetSpec{Name: "s"})
	require.NoError(t, err)
	require.Len(t, s.Migrations, 2)
	require.Equal(t, "s/0001_first", s.Migrations[0].ID())
	require.Equal(t, "s/0002_second", s.Migrations[1].ID())
	require.Len(t, s.Migrations[0].Checksum, 64)

	var ids []string
	for _, d := range s.Definitions {
		ids = append(ids, d.ID())
	}
	require.Equal(t, []string{"s/functions/app/f.sql", "s/views/app/a.sql", "s/views/app/b.sql", "s/views/app/bb_reads_b.sql", "s/views/app/c.sql"}, ids,
		"functions first; each view after the views it reads")
	f := s.Definitions[0]
	require.Equal(t, KindFunction, f.Kind)
	require.Equal(t, "app.f", f.Object)
	require.Equal(t, 3, f.Version)
	require.True(t, f.Recorded)
	require.Equal(t, 1, s.Definitions[1].Version, "a file definitions.sum does not list is at version 1")
	require.False(t, s.Definitions[1].Recorded)
	require.Equal(t, map[string]int{"views/app/gone.sql": 2}, s.Deleted)
	require.ErrorContains(t, SumsCurrent(s), "views/app/a.sql")

	// A file changed since definitions.sum was written has the next version.
	fsys["functions/app/f.sql"] = &fstest.MapFile{Data: []byte(strings.Replace(fnF, "hello", "hi", 1))}
	s2, err := Load(fsys, SetSpec{Name: "s"})
	require.NoError(t, err)
	require.Equal(t, 4, s2.Definitions[0].Version)
	require.False(t, s2.Definitions[0].Recorded)
	require.NotEqual(t, Fingerprint([]Set{s}), Fingerprint([]Set{s2}))
}

func sha(s string) string {
	sets, _ := Load(fstest.MapFS{"0001_x.sql": {}, "functions/app/f.sql": {Data: []byte(s)}}, SetSpec{Name: "x"})
	return sets.Definitions[0].Checksum
}

func TestLoadRejectsBadSets(t *testing.T) {
	t.Parallel()
	for want, fsys := range map[string]fstest.MapFS{
		"is not named NNNN_name.sql":                  {"1_x.sql": {Data: []byte("")}},
		"two files numbered 0001":                     {"0001_a.sql": {}, "0001_b.sql": {}},
		"has no migrations":                           {"definitions.sum": {}},
		`folder "sub" is neither`:                     {"0001_a.sql": {}, "sub/x": {}},
		"is not named functions/<schema>/<name>.sql":  {"0001_a.sql": {}, "functions/f.sql": {Data: []byte(fnF)}},
		"write create or replace function":            {"0001_a.sql": {}, "functions/app/f.sql": {Data: []byte("create function app.f() returns int language sql as 'select 1';")}},
		"defines app.g; this file is app.f's":         {"0001_a.sql": {}, "functions/app/f.sql": {Data: []byte(fnF + "create or replace function app.g() returns int language sql as 'select 1';")}},
		"holds only create or replace function app.f": {"0001_a.sql": {}, "functions/app/f.sql": {Data: []byte(fnF + "create table app.t (x int);")}},
		"grants on app.g, not on this file's app.f":   {"0001_a.sql": {}, "functions/app/f.sql": {Data: []byte(fnF + "grant execute on function app.f(), app.g() to x;")}},
		"comments on app.g":                           {"0001_a.sql": {}, "functions/app/f.sql": {Data: []byte(fnF + "comment on function app.g() is 'g';")}},
		"defines no function app.f":                   {"0001_a.sql": {}, "functions/app/f.sql": {Data: []byte("revoke all on function app.f() from public;")}},
		"defines view app.v 2 times":                  {"0001_a.sql": {}, "views/app/v.sql": {Data: []byte("create or replace view app.v as select 1;\ncreate or replace view app.v as select 2;")}},
		"write create or replace view":                {"0001_a.sql": {}, "views/app/v.sql": {Data: []byte("create view app.v as select 1;")}},
		`s/0002_b:2: "create or replace function app.f() returns int language sql as 'select 2';": functions and views`: {
			"0001_a.sql": {Data: []byte("create function app.f() returns int language sql as 'select 1';")},
			"0002_b.sql": {Data: []byte("-- after the history\ncreate or replace function app.f() returns int language sql as 'select 2';")}},
		`s/0002_b:1: "grant execute on function app.f() to x;"`:            {"0001_a.sql": {}, "0002_b.sql": {Data: []byte("grant execute on function app.f() to x;")}},
		`s/0002_b:1: "create view app.v as select 1;"`:                     {"0001_a.sql": {}, "0002_b.sql": {Data: []byte("create view app.v as select 1;")}},
		`s/0002_b:1: "alter function app.f() set work_mem = 1;"`:           {"0001_a.sql": {}, "0002_b.sql": {Data: []byte("alter function app.f() set work_mem = 1;")}},
		`s/0002_b: \ir functions/app/g.sql: no such function or view file`: {"0001_a.sql": {}, "0002_b.sql": {Data: []byte("\\ir functions/app/g.sql\n")}},
		"definitions.sum:1: want <path> <version> <sha256|deleted>":        {"0001_a.sql": {}, "definitions.sum": {Data: []byte("functions/app/f.sql x y\n")}},
	} {
		_, err := Load(fsys, SetSpec{Name: "s", History: 1})
		require.ErrorContains(t, err, want)
	}
	_, err := Load(fstest.MapFS{}, SetSpec{Name: "missing"})
	require.ErrorContains(t, err, `migration set "missing"`)
}

// A migration names a file with \ir where it needs the function before the set's definitions
// are applied: what runs is the file's text in its place; the checksum is the migration's own
// text's, so a later change of the file does not change the migration.
func TestIncludeExpandsTheCurrentFile(t *testing.T) {
	t.Parallel()
	mig := "create table app.t (x int);\n\\ir functions/app/f.sql\nalter table app.t add check (app.f() <> '');\n"
	fsys := fstest.MapFS{"0001_a.sql": {Data: []byte(mig)}, "functions/app/f.sql": {Data: []byte(fnF)}}
	s, err := Load(fsys, SetSpec{Name: "s"})
	require.NoError(t, err)
	m := s.Migrations[0]
	require.Equal(t, mig, m.SQL)
	require.Contains(t, m.Body, "set local check_function_bodies = off;\n"+strings.TrimRight(fnF, "\n")+"\nalter table app.t")
	require.NotContains(t, m.Body, "\n\\ir")

	fsys["functions/app/f.sql"] = &fstest.MapFile{Data: []byte(strings.Replace(fnF, "'hello; world'", "'hi; world'", 1))}
	s2, err := Load(fsys, SetSpec{Name: "s"})
	require.NoError(t, err)
	require.Equal(t, m.Checksum, s2.Migrations[0].Checksum)
	require.Contains(t, s2.Migrations[0].Body, "'hi; world'")
}

// Split knows where a semicolon ends a statement.
func TestSplit(t *testing.T) {
	t.Parallel()
	sql := `-- header

-- about a
create table a (x text default 'a;b' /* ; */);
create function f() returns text language plpgsql as $body$ begin return ';'; end $body$;
select E'it\'s;', $$;$$, "we;ird" from a; -- tail; comment
/* nested /* ; */ still */ select 2
`
	st := Split(sql)
	require.Len(t, st, 4)
	require.Equal(t, "-- about a", st[0].Comment)
	require.Equal(t, "create table a (x text default 'a;b' /* ; */);", st[0].SQL)
	require.Equal(t, 4, st[0].Line)
	require.True(t, strings.HasSuffix(st[1].SQL, "end $body$;"))
	require.Equal(t, `select E'it\'s;', $$;$$, "we;ird" from a;`, st[2].SQL)
	require.Equal(t, 6, st[2].Line)
	require.Contains(t, st[3].SQL, "select 2")
}

// Judge tells what Up does with a definition given what the database has.
func TestJudge(t *testing.T) {
	t.Parallel()
	d := Definition{Version: 3, Checksum: "c3"}
	row := func(v int, sum string, migrations int) *AppliedDefinition {
		return &AppliedDefinition{Version: v, Checksum: sum, Migrations: migrations}
	}
	for _, tc := range []struct {
		a    *AppliedDefinition
		want DefinitionState
	}{
		{nil, DefPending},
		{row(3, "c3", 7), DefApplied},
		{row(3, "c3", 6), DefStale},
		{row(2, "c2", 7), DefModified},
		{row(3, "other", 7), DefModified},
		{row(4, "c4", 7), DefNewer},
		{row(4, "c4", 1), DefNewer},
	} {
		st := Judge(d, tc.a, 7)
		require.Equal(t, tc.want, st, "%+v", tc.a)
		require.Equal(t, st != DefApplied && st != DefNewer, needsApply(st))
	}
}

// UpdateSums gives a new file version 1, a changed one its next version, keeps a deleted one's
// line, and leaves the file alone when nothing changed.
func TestUpdateSums(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(p, s string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644))
	}
	load := func() Set {
		s, err := Load(os.DirFS(dir), SetSpec{Name: "s"})
		require.NoError(t, err)
		return s
	}
	write("0001_a.sql", "")
	write("functions/app/f.sql", fnF)
	write("functions/app/g.sql", strings.ReplaceAll(fnF, "app.f", "app.g"))
	changed, err := UpdateSums(dir)
	require.NoError(t, err)
	require.True(t, changed)
	require.NoError(t, SumsCurrent(load()))
	changed, err = UpdateSums(dir)
	require.NoError(t, err)
	require.False(t, changed)

	write("functions/app/f.sql", strings.Replace(fnF, "hello", "hi", 1))
	require.ErrorContains(t, SumsCurrent(load()), "functions/app/f.sql")
	require.NoError(t, os.Remove(filepath.Join(dir, "functions/app/g.sql")))
	_, err = UpdateSums(dir)
	require.NoError(t, err)
	s := load()
	require.NoError(t, SumsCurrent(s))
	require.Equal(t, 2, s.Definitions[0].Version)
	require.Equal(t, map[string]int{"functions/app/g.sql": 2}, s.Deleted, "the deletion is the next version")
	sums, err := os.ReadFile(filepath.Join(dir, SumsFile))
	require.NoError(t, err)
	require.Contains(t, string(sums), "functions/app/g.sql 2 deleted\n")
	changed, err = UpdateSums(dir)
	require.NoError(t, err)
	require.False(t, changed, "a deletion is recorded once")

	// Written again, a deleted file comes back at the next version.
	write("functions/app/g.sql", strings.ReplaceAll(fnF, "app.f", "app.g"))
	_, err = UpdateSums(dir)
	require.NoError(t, err)
	s = load()
	require.Equal(t, 3, s.Definitions[1].Version)
	require.Empty(t, s.Deleted)
}

// The shipped sets load, with every definition recorded in definitions.sum, and the psql script
// wraps each migration and each definition with the bookkeeping.
func TestShippedSetsAndScript(t *testing.T) {
	t.Parallel()
	sets, err := Shipped("core", "comms", "files", "accounts")
	require.NoError(t, err)
	for _, s := range sets {
		require.NotEmpty(t, s.Definitions, s.Name)
		require.NoError(t, SumsCurrent(s))
	}
	var buf bytes.Buffer
	require.NoError(t, WriteSQL(&buf, sets))
	script := buf.String()
	n := 0
	for _, s := range sets {
		for _, m := range s.Migrations {
			require.Contains(t, script, "===== "+m.ID()+" =====")
			require.Contains(t, script, m.Checksum)
			n++
		}
		for _, d := range s.Definitions {
			require.Contains(t, script, "----- "+d.ID()+" (version ")
			require.Contains(t, script, d.Checksum)
			n++
		}
	}
	require.Equal(t, n, strings.Count(script, "\\if :taskorch_apply"))
	require.Equal(t, n, strings.Count(script, "\\endif"))
	require.NotContains(t, script, "\n\\ir ", "includes are expanded: the script stands alone")
}
