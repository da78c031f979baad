package processes_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/migrations"
)

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#+\s+(.+)$`)
)

// Every path the processes' indexes (processes/README.md, processes/<set>/README.md) link to
// exists, and every #section of a linked document is one of its headings: an index that names a
// moved or deleted file fails here.
func TestIndexLinksResolve(t *testing.T) {
	t.Parallel()
	var readmes []string
	require.NoError(t, filepath.WalkDir(".", func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && e.Name() == "README.md" {
			readmes = append(readmes, p)
		}
		return err
	}))
	require.Contains(t, readmes, "README.md")
	links := 0
	for _, readme := range readmes {
		text, err := os.ReadFile(readme)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			target, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(filepath.Dir(readme), target)
			fi, err := os.Stat(path)
			require.NoError(t, err, "%s links to %s, which does not exist", readme, m[1])
			links++
			if anchor != "" {
				require.False(t, fi.IsDir(), "%s: %s", readme, m[1])
				doc, err := os.ReadFile(path)
				require.NoError(t, err)
				var slugs []string
				for _, h := range heading.FindAllStringSubmatch(string(doc), -1) {
					slugs = append(slugs, slug(h[1]))
				}
				require.Contains(t, slugs, anchor, "%s links to %s, which has no such section", readme, m[1])
			}
		}
	}
	require.Greater(t, links, 100)
}

// Every process set has its folder here with an index, and processes/README.md links to it.
func TestEveryProcessSetIndexed(t *testing.T) {
	t.Parallel()
	top, err := os.ReadFile("README.md")
	require.NoError(t, err)
	for _, set := range migrations.Sets[1:] {
		require.Equal(t, "processes/"+set, migrations.Dir(set))
		require.FileExists(t, filepath.Join(set, "README.md"))
		require.Contains(t, string(top), "]("+set+"/README.md)")
	}
}

// slug is the anchor GitHub gives a heading: lower case, spaces as hyphens, without the
// punctuation other than hyphens and underscores.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
