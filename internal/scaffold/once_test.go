package scaffold_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/internal/scaffold"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

var (
	definesFunction = regexp.MustCompile(`(?m)^create (?:or replace )?function ([a-z0-9_]+\.[a-z0-9_]+)\(`)
	section         = regexp.MustCompile(`(?m)^-- ([1-9])\. `)
)

// Each flavour the scaffold offers writes the final state of a process once: every function
// defined exactly once in the file (and every function the file leaves in its schema one it
// defines), each of the recipe's eight sections once and in order, the durations in
// process_config only, no history (no alter but the shared settings table's column, no comments for earlier versions' callers) and no
// statement after a return; the file applies cleanly to a migrated database.
func TestScaffoldWritesEachDefinitionOnce(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]scaffold.Process{
		"db_function": {Name: "rebuild_summary", Schema: "reports", Key: "account_id"},
		"channel":     {Name: "send_reminder", Schema: "crm", Key: "customer_id", Channel: taskorch.TypeEmail},
		"wait step": {Name: "remind_unpaid", Schema: "billing", Key: "invoice_id", Channel: taskorch.TypeEmail,
			WaitSignal: "invoice.paid", WaitTimeout: "3 days"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := scaffold.Render(p)
			require.NoError(t, err)
			sql := string(out)

			var defined []string
			for _, m := range definesFunction.FindAllStringSubmatch(sql, -1) {
				require.NotContains(t, defined, m[1], "%s is defined twice", m[1])
				defined = append(defined, m[1])
			}
			var listed []string
			for _, f := range p.Functions() {
				listed = append(listed, f.Name)
			}
			require.ElementsMatch(t, listed, defined, "the functions the file defines are those it grants")

			var sections []string
			for _, m := range section.FindAllStringSubmatch(sql, -1) {
				sections = append(sections, m[1])
			}
			require.Equal(t, []string{"1", "2", "3", "4", "5", "6", "7", "8"}, sections)

			// The one alter the file may hold: the schema's settings table, shared with processes an
			// earlier taskorch scaffolded, gets the column this one's row needs.
			shared := "alter table " + p.Schema + ".process_config add column if not exists wait_timeout"
			require.Equal(t, 1, strings.Count(sql, shared))
			rest := strings.Replace(sql, shared, "", 1)
			for _, history := range []string{"alter table", "alter function", "Kept for", "earlier version", "before this version", "as before"} {
				require.NotContains(t, rest, history)
			}
			settings := strings.Index(sql, "on conflict (process) do nothing;")
			require.Positive(t, settings)
			require.NotRegexp(t, `interval '[1-9]`, sql[settings:], "a duration outside process_config")
			requireNoStatementAfterReturn(t, sql)

			pool := dbtest.NewDB(t)
			_, err = pool.Exec(t.Context(), sql)
			require.NoError(t, err, "the file applies")
			inSchema := scalar[[]string](t, pool, `select coalesce(array_agg(n.nspname || '.' || p.proname order by p.proname), '{}')
				from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = $1`, p.Schema)
			require.ElementsMatch(t, defined, inSchema, "the functions in the schema are the file's, each once")
		})
	}
}

// requireNoStatementAfterReturn fails when a PL/pgSQL return is followed, in its block, by a
// statement (which could never run): the next line after the return's statement must end or
// branch the block.
func requireNoStatementAfterReturn(t *testing.T, sql string) {
	t.Helper()
	lines := strings.Split(sql, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "return ") {
			continue
		}
		start := i
		for !strings.HasSuffix(strings.TrimSpace(lines[i]), ";") {
			i++
		}
		next := i + 1
		for next < len(lines) && (strings.TrimSpace(lines[next]) == "" || strings.HasPrefix(strings.TrimSpace(lines[next]), "--")) {
			next++
		}
		require.Less(t, next, len(lines))
		word := strings.Fields(lines[next])[0]
		require.True(t, slices.Contains([]string{"end", "end;", "elsif", "else", "exception", "when"}, word),
			"line %d: %q follows the return of line %d", next+1, lines[next], start+1)
	}
}
