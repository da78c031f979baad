package main

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// A test binary has no version of its own: it says "dev", with the Go version and platform it
// was built for; --version prints the same line, --json the same facts.
func TestVersion(t *testing.T) {
	t.Parallel()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	r := run(t, "version")
	require.Equal(t, 0, r.code, r.err)
	require.Equal(t, "taskorch dev "+runtime.Version()+" "+platform+"\n", r.out)
	require.Equal(t, r.out, run(t, "--version").out)

	b := runJSON[map[string]any](t, "version")
	require.Equal(t, "dev", b["version"])
	require.Equal(t, runtime.Version(), b["go_version"])
	require.Equal(t, platform, b["platform"])
	require.Equal(t, false, b["modified"])
}

// The version comes from ldflags first, then from the module (go install ...@vX.Y.Z); the
// commit, its date and a dirty checkout from the vcs settings go build records.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := []debug.BuildSetting{
		{Key: "-trimpath", Value: "true"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"},
		{Key: "vcs.time", Value: "2026-11-25T09:30:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name      string
		ldVersion string
		bi        debug.BuildInfo
		want      string
	}{
		{"checkout", "dev", debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			"dev (commit 1a2b3c4, 2026-11-25, dirty) go1.26.1 "},
		{"go install @version", "dev", debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.1.0"}},
			"v0.1.0 go1.26.1 "},
		{"ldflags win", "v0.2.0-rc.1", debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.1.0"}, Settings: vcs[:4]},
			"v0.2.0-rc.1 (commit 1a2b3c4, 2026-11-25) go1.26.1 "},
		{"nothing known", "", debug.BuildInfo{}, "dev " + runtime.Version() + " "},
	} {
		got := makeBuildInfo(tc.ldVersion, &tc.bi).String()
		require.Equal(t, tc.want+runtime.GOOS+"/"+runtime.GOARCH, got, tc.name)
	}
}

// A binary built with -ldflags "-X main.version=..." (as make release does; the end-to-end
// tests' binary is) prints that version.
func TestE2EVersion(t *testing.T) {
	t.Parallel()
	bin := taskorchBinary(t)
	out, err := exec.Command(bin, "version").Output()
	require.NoError(t, err)
	line := string(out)
	require.Regexp(t, `^taskorch `+e2eVersion+` (\(.*\) )?`+runtime.Version()+` `+runtime.GOOS+`/`+runtime.GOARCH+"\n$", line)
	out, err = exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	require.Equal(t, line, string(out))

	out, err = exec.Command(bin, "version", "--json").Output()
	require.NoError(t, err)
	var b buildInfo
	require.NoError(t, json.Unmarshal(out, &b))
	require.Equal(t, e2eVersion, b.Version)
	require.Equal(t, runtime.Version(), b.GoVersion)
}
