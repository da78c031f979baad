package worker

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rules that keep "how a task is run" readable (doc.go), checked on the source: each thing
// happens in one place. A statement, a call or a message found elsewhere fails the test, naming
// the file.

// sources returns the non-test Go files of dir, by name.
func sources(t *testing.T, dir string) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		out[n] = string(b)
	}
	require.NotEmpty(t, out, "no Go files in %s", dir)
	return out
}

// where lists the files (of this package and of package taskorch, the API) in which re matches.
func where(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{".", "../.."} {
		for name, src := range sources(t, dir) {
			if re.MatchString(src) {
				files = append(files, filepath.Clean(name))
			}
		}
	}
	slices.Sort(files)
	return files
}

// The outcome writer: every SQL statement that records what became of a task under its lease
// is issued from writer.go, and from no other file of the worker or of the API.
func TestOutcomeSQLIsWrittenInOneFile(t *testing.T) {
	t.Parallel()
	for _, fn := range []string{
		"fail_task", "fail_task_with_policy", "snooze_task", "complete_tasks_with_results", "complete_failed_call",
		"run_task_handlers", "lock_lease", "record_error", "release_tasks", "release_worker_tasks",
		"complete_task", "complete_tasks",
	} {
		files := where(t, regexp.MustCompile(`queues\.`+fn+`\s*\(`))
		if fn == "complete_task" || fn == "complete_tasks" {
			require.Empty(t, files, "queues.%s: the worker completes with complete_tasks_with_results", fn)
			continue
		}
		require.Equal(t, []string{"writer.go"}, files, "queues.%s must be issued from writer.go only", fn)
	}
}

// The one claim path: every claim statement is in claim.go.
func TestClaimSQLIsInOneFile(t *testing.T) {
	t.Parallel()
	for _, fn := range []string{"claim_tasks", "claim_limited_tasks", "claim_limited_tasks_at_token", "claim_tasks_by_id"} {
		require.Equal(t, []string{"claim.go"}, where(t, regexp.MustCompile(`queues\.`+fn+`\s*\(`)),
			"queues.%s must be issued from claim.go only", fn)
	}
	require.Equal(t, []string{"claim.go"}, where(t, regexp.MustCompile(`\.Query\([^)]*claimSQL`)),
		"the claim statements are run in one place")
}

// One place starts a task (the starter, buffer.go), and one observes its end (finish,
// outcome.go), after its outcome is committed: nothing marks a span or counts an outcome
// before.
func TestOnePlaceStartsAndOneFinishes(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"buffer.go"}, where(t, regexp.MustCompile(`\bw\.start\(`)), "tasks start in the starter only")
	require.Equal(t, []string{"outcome.go"}, where(t, regexp.MustCompile(`\.taskFinished\(`)), "only finish tells the observers a task ended")
	require.Equal(t, []string{"executor.go"}, where(t, regexp.MustCompile(`\.taskStarted\(`)), "only start tells the observers a task started")
}

// The message of a result over a bound is written once, whichever bound and path.
func TestResultTooLargeMessageOnce(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"result.go"}, where(t, regexp.MustCompile(`the task's result is`)))
	require.Equal(t, []string{"result.go"}, where(t, regexp.MustCompile(`the (worker|database)'s limit of %d bytes`)))
}
