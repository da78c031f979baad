package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=..." (make release does). Left at
// "dev", the version comes from the build info: the module's version when built by
// `go install github.com/taskorch/taskorch/cmd/taskorch@vX.Y.Z`.
var version = "dev"

// commit, commitTime and modified ("true": uncommitted changes) may be set the same way (make release does, from git), for builds that
// carry no vcs.* settings: go build stamps them only in a git checkout whose .git is a
// directory, and not with -buildvcs=false.
var commit, commitTime, modified string

// buildInfo is what `taskorch version` prints: where the binary came from.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`      // vcs.revision, when built in a git checkout
	CommitAt  string `json:"commit_time,omitempty"` // vcs.time, RFC 3339
	Modified  bool   `json:"modified"`              // the checkout had uncommitted changes
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// currentBuild reads the binary's build info; ldflags' version wins over the module's.
func currentBuild() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	b := makeBuildInfo(version, bi)
	if b.Commit == "" {
		b.Commit, b.CommitAt, b.Modified = commit, commitTime, modified == "true"
	}
	return b
}

// makeBuildInfo combines the version set by ldflags (or "dev") with a binary's build info.
func makeBuildInfo(ldVersion string, bi *debug.BuildInfo) buildInfo {
	b := buildInfo{
		Version:   ldVersion,
		GoVersion: bi.GoVersion,
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if b.GoVersion == "" {
		b.GoVersion = runtime.Version()
	}
	if b.Version == "" || b.Version == "dev" {
		b.Version = "dev"
		// "(devel)" is a build from a checkout, "" a test binary: neither names a version.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitAt = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one-line form: "v0.1.0 (commit abc1234, 2026-11-25, dirty) go1.26.0 linux/amd64".
func (b buildInfo) String() string {
	var vcs []string
	if b.Commit != "" {
		vcs = append(vcs, "commit "+b.Commit[:min(7, len(b.Commit))])
	}
	if b.CommitAt != "" {
		vcs = append(vcs, b.CommitAt[:min(10, len(b.CommitAt))])
	}
	if b.Modified {
		vcs = append(vcs, "dirty")
	}
	s := b.Version
	if len(vcs) > 0 {
		s += " (" + strings.Join(vcs, ", ") + ")"
	}
	return s + " " + b.GoVersion + " " + b.Platform
}

func newVersionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print taskorch's version",
		Long: `Prints taskorch's version, the commit it was built from (with its date, and "dirty" when the
checkout had uncommitted changes), the Go version and the platform. taskorch --version prints the
same line. A release binary (make release) carries its version; one built by go install ...@vX.Y.Z
carries the module's; a build from a checkout says "dev" and names its commit.`,
		Example: `  taskorch version          # taskorch v0.1.0 (commit 1a2b3c4, 2026-11-25) go1.26.0 linux/amd64
  taskorch version --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := currentBuild()
			if g.jsonOut {
				return writeJSON(cmd.OutOrStdout(), b)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "taskorch", b.String())
			return err
		},
	}
	addJSONFlag(cmd, g)
	return cmd
}
