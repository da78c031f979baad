package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/taskorch/taskorch/internal/httpapi"
	"github.com/taskorch/taskorch/internal/testing/dbtest"
)

// openAPISpec is the part of openapi.yaml the comparison reads.
type openAPISpec struct {
	OpenAPI    string                               `yaml:"openapi"`
	Paths      map[string]map[string]map[string]any `yaml:"paths"`
	Components struct {
		Schemas map[string]struct {
			Required   []string       `yaml:"required"`
			Properties map[string]any `yaml:"properties"`
		} `yaml:"schemas"`
	} `yaml:"components"`
}

func readOpenAPI(t *testing.T) openAPISpec {
	t.Helper()
	b, err := os.ReadFile("../../openapi.yaml")
	require.NoError(t, err)
	var spec openAPISpec
	require.NoError(t, yaml.Unmarshal(b, &spec))
	require.Equal(t, "3.1.0", spec.OpenAPI)
	return spec
}

// openapi.yaml and `taskorch api` describe the same API: every route the spec names is served
// (a request to it reaches its handler: 401 without a token, not the 404 of a route that does
// not exist), every route served is in the spec, and each schema's fields are the JSON fields
// of the Go type the handler reads or writes, its required ones those Go always writes.
func TestOpenAPIMatchesServer(t *testing.T) {
	t.Parallel()
	spec := readOpenAPI(t)
	var inSpec []string
	for path, ops := range spec.Paths {
		for method := range ops {
			switch method {
			case "get", "post", "put", "patch", "delete", "head", "options", "trace":
				inSpec = append(inSpec, strings.ToUpper(method)+" "+path)
			}
		}
	}
	auth, err := httpapi.TokenAuth([]httpapi.Token{{Role: "app", Value: "a-token-for-the-spec-test"}})
	require.NoError(t, err)
	h, err := httpapi.New(dbtest.NewDB(t), httpapi.Config{Authenticate: auth, Roles: []string{"app"}})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	var served []string
	for _, r := range append(h.Routes(), apiOwnRoutes...) {
		served = append(served, r.Method+" "+r.Path)
	}
	sort.Strings(inSpec)
	sort.Strings(served)
	require.Equal(t, served, inSpec, "openapi.yaml's routes (right) differ from the server's (left)")

	srv := httptest.NewServer(apiMux(h))
	t.Cleanup(srv.Close)
	for _, route := range inSpec {
		method, path, _ := strings.Cut(route, " ")
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+strings.ReplaceAll(path, "{id}", "1"), nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		want := http.StatusUnauthorized
		if path == "/healthz" {
			want = http.StatusOK
		}
		require.Equal(t, want, resp.StatusCode, "%s: %s", route, body)
		_, documented := spec.Paths[path][strings.ToLower(method)]["responses"].(map[string]any)[strconv.Itoa(want)]
		require.True(t, documented, "%s answers %d, which openapi.yaml does not list", route, want)
	}
	// A route that is not in the spec is not served.
	resp, err := http.Get(srv.URL + "/v1/tasks/1/delete")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	for name, typ := range map[string]reflect.Type{
		"Task":            reflect.TypeFor[httpapi.Task](),
		"EnqueueRequest":  reflect.TypeFor[httpapi.EnqueueRequest](),
		"EnqueueResponse": reflect.TypeFor[httpapi.EnqueueResponse](),
		"TaskList":        reflect.TypeFor[httpapi.TaskList](),
		"SignalRequest":   reflect.TypeFor[httpapi.SignalRequest](),
		"SignalResponse":  reflect.TypeFor[httpapi.SignalResponse](),
	} {
		schema, ok := spec.Components.Schemas[name]
		require.True(t, ok, "openapi.yaml has no schema %s", name)
		var fields, always []string
		for i := range typ.NumField() {
			tag := typ.Field(i).Tag.Get("json")
			field, opts, _ := strings.Cut(tag, ",")
			fields = append(fields, field)
			if opts != "omitempty" && !strings.HasPrefix(name, "Enqueue") && !strings.HasPrefix(name, "Signal") {
				always = append(always, field)
			}
		}
		var props []string
		for p := range schema.Properties {
			props = append(props, p)
		}
		sort.Strings(fields)
		sort.Strings(props)
		require.Equal(t, fields, props, "schema %s's properties (right) differ from the Go type's JSON fields (left)", name)
		if len(always) > 0 {
			req := slices.Clone(schema.Required)
			sort.Strings(req)
			sort.Strings(always)
			require.Equal(t, always, req, "schema %s's required fields (right) differ from those Go always writes (left)", name)
		}
	}
}
