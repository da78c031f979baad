package taskorch_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The map of the house (docs/design.md): which packages call which, drawn as rooms, and the
// rules that keep the library light. These tests read the real import graph with the go
// command, over every module of the workspace (go.work).

const modulePath = "github.com/taskorch/taskorch"

// goCmd runs the go command in dir with env added, and returns its standard output.
func goCmd(t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	// go test puts its own GOROOT/bin first in the tests' PATH.
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s: %s", strings.Join(args, " "), stderr.String())
	return out
}

// goPackage is what go list says of a package.
type goPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
	Module       *struct{ Path string }
}

// listPackages lists the packages of every module of the workspace.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	out := goCmd(t, ".", nil, "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Module", modulePath+"/...")
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		pkgs = append(pkgs, p)
	}
	require.Greater(t, len(pkgs), 30, "go list found too few packages: is go.work there?")
	return pkgs
}

// rel is a package's path inside the repository ("" for the root package).
func rel(path string) (string, bool) {
	if path == modulePath {
		return "", true
	}
	r, ok := strings.CutPrefix(path, modulePath+"/")
	return r, ok
}

// room is the node of docs/design.md's map a package is drawn in; "" for test tooling (the
// test helpers, the suites in modules of their own, the chaos harness, the developer's
// commands), which the map leaves out.
func room(r string) string {
	under := func(prefixes ...string) bool {
		for _, p := range prefixes {
			if r == p || strings.HasPrefix(r, p+"/") {
				return true
			}
		}
		return false
	}
	switch {
	case under("internal/testing", "internal/cmd", "dashboard/browser", "migrations/processtest",
		"cmd/taskorch/internal/chaos", "cmd/taskorch/internal/cmd"):
		return ""
	case under("cmd/taskorch"):
		return "cmd"
	case under("providers"):
		return "providers"
	case under("transport/redisstream", "transport/sqs"):
		return "transports"
	case under("transport"):
		return "transport"
	case under("contrib"):
		return "contrib"
	case under("dashboard", "webhooks", "internal/httpapi"):
		return "dashboard"
	case under("internal/worker"):
		return "worker"
	case under("tasktype"):
		return "tasktype"
	case r == "", under("taskorchtest", "internal/builtinhandlers", "internal/kit", "internal/push"):
		return "api"
	case under("examples"):
		return "examples"
	case under("internal", "migrations", "processes"):
		return "rooms"
	}
	return "?" + r
}

// mapEdges reads the arrows of the map in docs/design.md ("a --> b").
func mapEdges(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("docs/design.md")
	require.NoError(t, err)
	doc := string(b)
	i := strings.Index(doc, "## The map of the house")
	require.GreaterOrEqual(t, i, 0, "docs/design.md has no map of the house")
	block := regexp.MustCompile("(?s)```mermaid\n(.*?)```").FindStringSubmatch(doc[i:])
	require.NotNil(t, block, "the map is a mermaid block")
	var edges []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(\w+)\s*-->\s*(\w+)\s*$`).FindAllStringSubmatch(block[1], -1) {
		edges = append(edges, m[1]+" --> "+m[2])
	}
	slices.Sort(edges)
	return edges
}

// The map in docs/design.md is the house as built: every arrow drawn is an import between two
// rooms, and every import between rooms is drawn.
func TestHouseMapIsTrue(t *testing.T) {
	t.Parallel()
	var actual []string
	for _, p := range listPackages(t) {
		r, ok := rel(p.ImportPath)
		require.True(t, ok, p.ImportPath)
		from := room(r)
		require.False(t, strings.HasPrefix(from, "?"), "package %s is in no room of the map (house_test.go, room)", p.ImportPath)
		if from == "" {
			continue
		}
		for _, imp := range p.Imports {
			ri, ok := rel(imp)
			if !ok {
				continue
			}
			to := room(ri)
			require.NotEmpty(t, to, "%s imports test tooling %s", p.ImportPath, imp)
			if to != from {
				actual = append(actual, from+" --> "+to)
			}
		}
	}
	slices.Sort(actual)
	actual = slices.Compact(actual)
	require.Equal(t, mapEdges(t), actual, "docs/design.md's map and the imports differ")
}

// The rules of the house: the API and the shared types never reach into the machinery's
// consumers; the machinery does not know the API, the command or the dashboard; test tooling is
// imported by tests (and the test harnesses) only; the root module brings no SDK.
func TestHouseRules(t *testing.T) {
	t.Parallel()
	forbidden := func(from string, imports []string, prefixes ...string) {
		t.Helper()
		for _, imp := range imports {
			for _, p := range prefixes {
				if imp == p || strings.HasPrefix(imp, p+"/") {
					t.Errorf("%s imports %s", from, imp)
				}
			}
		}
	}
	m := func(s string) string { return modulePath + "/" + s }
	sdks := []string{"github.com/prometheus", "go.opentelemetry.io", "github.com/aws", "github.com/redis",
		"github.com/twilio", "github.com/resend", "github.com/wneessen", "github.com/chromedp", "github.com/spf13",
		"google.golang.org"}
	for _, p := range listPackages(t) {
		r, _ := rel(p.ImportPath)
		all := slices.Concat(p.Imports, p.TestImports, p.XTestImports)
		switch r {
		case "tasktype":
			// A leaf: nothing of taskorch's.
			forbidden(p.ImportPath, p.Imports, modulePath)
		case "", "internal/worker":
			forbidden(p.ImportPath, p.Imports, m("cmd"), m("dashboard"), m("webhooks"), m("providers"), m("contrib"),
				m("transport/redisstream"), m("transport/sqs"), m("taskorchtest"))
		}
		if r == "internal/worker" {
			for _, imp := range p.Imports {
				require.NotEqual(t, modulePath, imp, "internal/worker imports the API")
			}
		}
		// Test tooling is imported by tests, and by the tools that are themselves test tooling.
		if room(r) != "" {
			forbidden(p.ImportPath, p.Imports, m("internal/testing"))
		}
		// The root module brings no SDK, not even in its tests.
		if p.Module != nil && p.Module.Path == modulePath {
			forbidden(p.ImportPath, all, sdks...)
			forbidden(p.ImportPath, all, m("providers"), m("contrib"), m("transport/redisstream"), m("transport/sqs"),
				m("internal/testing/s3test"), m("cmd/taskorch"))
		}
	}
}

// A program that imports only github.com/taskorch/taskorch has none of the SDKs in its module
// graph: a scratch module that imports the root package, tidied against the module cache
// (GOPROXY=off, no workspace), lists none of them in its go.sum.
func TestLibraryUsersGetNoSDKs(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	write("go.mod", "module example.com/scratch\n\ngo 1.26.0\n\nrequire "+modulePath+" v0.0.0-00010101000000-000000000000\n\nreplace "+modulePath+" => "+repo+"\n")
	write("main.go", "package main\n\nimport _ \""+modulePath+"\"\n\nfunc main() {}\n")
	sums, err := os.ReadFile("go.sum") // the checksums tidy needs, so that it asks no one
	require.NoError(t, err)
	write("go.sum", string(sums))
	goCmd(t, dir, []string{"GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off"}, "mod", "tidy")
	b, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	require.NoError(t, err)
	got := string(b)
	require.Contains(t, got, "github.com/jackc/pgx/v5 ", "the scratch module's go.sum lists the library's own dependencies")
	for _, sdk := range []string{"aws", "twilio", "resend", "wneessen", "redis", "chromedp", "prometheus", "opentelemetry", "spf13", "protobuf"} {
		require.NotContains(t, got, sdk, "a program importing only %s gets %s in its go.sum", modulePath, sdk)
	}
	deps := strings.Fields(string(goCmd(t, dir, []string{"GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off"}, "list", "-deps", modulePath)))
	t.Logf("go list -deps %s: %d packages", modulePath, len(deps))
}
