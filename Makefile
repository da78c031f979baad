# taskorch — `make help` lists the targets.
GO       ?= go
BIN      := bin/taskorch
WITHPG   := $(GO) run ./internal/cmd/withpg
# Every package of every module of the workspace (go.work): the library, and the modules that
# bring SDKs (providers, transports, contrib, the command) or test them. ./... alone would be the
# root module only.
PKGS     := github.com/taskorch/taskorch/...
# The workspace's module directories, for the tools that take directories.
MODULES   = $(shell $(GO) list -m -f '{{.Dir}}')
GOLANGCI_VERSION := v2.15.0

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: demo
demo: deps-demo build ## Run taskorch on a private PostgreSQL: worker, dashboard and a demo (Ctrl-C stops it; needs Go and PostgreSQL only)
	$(BIN) dev $(DEMO_FLAGS)

.PHONY: demo-fresh
demo-fresh: override DEMO_FLAGS += --fresh
demo-fresh: demo ## make demo on a new database: deletes the demo's data first (= make demo DEMO_FLAGS=--fresh)

.PHONY: build
build: go-check ## Build bin/taskorch
	$(GO) build -o $(BIN) ./cmd/taskorch

.PHONY: go-check
go-check:
	@GO='$(GO)' scripts/install-deps.sh go

.PHONY: deps-demo
deps-demo: ## What make demo needs: check Go; install PostgreSQL's server and client if missing (apt, as root), else say how
	@GO='$(GO)' scripts/install-deps.sh demo

.PHONY: deps
deps: ## What the tests need: deps-demo, plus redis-server, chromium, pgbouncer, iproute2, postfix (apt, as root; else say how), versitygw, toxiproxy (go install)
	@GO='$(GO)' scripts/install-deps.sh test

.PHONY: test
test: deps ## Run every test against one private PostgreSQL
	$(WITHPG) -- $(GO) test -count=1 $(PKGS)

.PHONY: schema
schema: deps-demo ## Regenerate schema.sql (every definition after all migrations) and the sets' definitions.sum; make test checks both
	$(WITHPG) -- $(GO) run ./internal/cmd/schemadump -o schema.sql

.PHONY: test-hostile
test-hostile: deps ## The hostile-input suite: every probe of docs/security.md's audit, as the application, operator and worker roles
	$(WITHPG) -- $(GO) test -count=1 -run 'Hostile|Unforgeable|UnreadableClaimed|NeverDeadlock|LeastPrivilege|Injection|RunFunction|SearchPath' ./ ./migrations/processtest ./internal/scaffold

# The race detector's packages: every one but the Chromium tests (dashboard/browser), whose Go side
# is the test harness driving a browser; the dashboard's handlers they exercise are raced in
# dashboard's own tests. Nor the end-to-end tests (TestE2E*): they drive separate taskorch
# processes (and Python, Node.js, a TypeScript client), built without the race detector, so only
# their harness would be raced; the code those processes run is raced in its own packages' tests.
# It keeps CI within its time.
RACE_PKGS = $(shell $(GO) list $(PKGS) | grep -v '/dashboard/browser')
RACE_SKIP = ^TestE2E

.PHONY: test-race
test-race: deps ## Run every test with the race detector (but the Chromium and the end-to-end tests)
	$(WITHPG) -- $(GO) test -count=1 -race -skip '$(RACE_SKIP)' $(RACE_PKGS)

.PHONY: bench
bench: deps ## Run the Go benchmarks on a PostgreSQL with default durability (the library's and the transports')
	$(WITHPG) -durable -- $(GO) test -run '^$$' -bench . -benchtime 200000x -count 3 . ./internal/testing/transportsuite

.PHONY: bench-all
bench-all: deps build ## taskorch bench: every mode, on a private PostgreSQL with default durability
	$(WITHPG) -durable -- sh -c 'export DATABASE_URL=$$TASKORCH_TEST_DATABASE_URL; for m in throughput latency backlog processes memory; do $(BIN) bench $$m || exit 1; done'

ROUNDS ?= 3
TASKS  ?= 200000

.PHONY: bench-peers
bench-peers: deps-demo build ## taskorch against River (bench/peers/river) in the same run, default durability: ROUNDS (3) alternating pairs of TASKS (200000) no-op tasks (throughput), then of an application's transactions (app-tx: an order row + one enqueue)
	cd bench/peers/river && GOWORK=off $(GO) build -o ../../../bin/riverbench .
	$(WITHPG) -durable -- sh -c 'DATABASE_URL=$$TASKORCH_TEST_DATABASE_URL ROUNDS=$(ROUNDS) TASKS=$(TASKS) scripts/bench-peers.sh'

# Each fuzzer runs a fixed number of inputs, about ten seconds' worth on a loaded two-core machine
# (pkg:Fuzzer:count). A count, not a duration: with a duration, Go 1.26's fuzzing coordinator can
# report its own deadline as a failure ("context deadline exceeded", no failing input written;
# golang/go#75804, fixed in Go 1.27). FUZZTIME overrides every count, e.g. make fuzz FUZZTIME=10m.
FUZZTIME ?=
# How long the fuzzer may spend shrinking each new interesting input (go test's default is 60s).
# A fuzzer that calls PostgreSQL sees new coverage in pgx's network code now and then, and
# shrinking that input took the rest of a 10-second run; 100 tries keep the run fuzzing.
FUZZMINIMIZETIME ?= 100x
FUZZERS  := ./internal/envelope:FuzzParse:150000x .:FuzzTypedPayload:25000x .:FuzzRunFunctionName:8000x ./cmd/taskorch:FuzzParsePayload:8000x ./internal/redact:FuzzJSON:120000x

.PHONY: fuzz
fuzz: deps ## Run each fuzzer for a fixed number of inputs (about 10s each), or for FUZZTIME, e.g. make fuzz FUZZTIME=10m
	$(WITHPG) -- sh -c 'for f in $(FUZZERS); do pkg=$${f%%:*}; rest=$${f#*:}; name=$${rest%%:*}; n=$${rest#*:}; t="$(FUZZTIME)"; t=$${t:-$$n}; echo "== $$pkg $$name ($$t)"; $(GO) test -count=1 -run NONE -fuzz "^$$name\$$" -fuzztime $$t -fuzzminimizetime $(FUZZMINIMIZETIME) "$$pkg" || exit 1; done'

VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMITAT  ?= $(shell git log -1 --format=%cI 2>/dev/null)
MODIFIED  ?= $(shell git diff --quiet HEAD 2>/dev/null && echo false || echo true)
PLATFORMS := linux/amd64 linux/arm64

.PHONY: release
release: ## Static binaries for linux/amd64 and linux/arm64 in dist/, with SHA256SUMS (VERSION: git describe)
	rm -rf dist && mkdir -p dist
	for p in $(PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -buildvcs=auto \
			-ldflags "-s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.commitTime=$(COMMITAT) -X main.modified=$(MODIFIED)" \
			-o dist/taskorch-$${p%/*}-$${p#*/} ./cmd/taskorch || exit 1; \
	done
	cd dist && sha256sum taskorch-* > SHA256SUMS
	@echo "dist/: $$(cd dist && ls | tr '\n' ' ')(version $(VERSION))"

.PHONY: chaos
chaos: deps build ## Chaos harness: 100,000 tasks under every fault, lost = duplicates = 0 (root; docs/testing.md)
	$(GO) run ./cmd/taskorch/internal/cmd/chaos -bin $(BIN) -tasks 100000 -duration 12m $(CHAOS_FLAGS)

.PHONY: chaos-short
chaos-short: deps build ## The chaos harness's short form, what CI runs: 10,000 tasks, every fault, ~3½ minutes
	$(GO) run ./cmd/taskorch/internal/cmd/chaos -bin $(BIN) -tasks 10000 -duration 180s $(CHAOS_FLAGS)

.PHONY: lint
lint: go-check ## Run go vet and golangci-lint over every module (and go vet on bench/peers/river); the pinned golangci-lint is go-installed on first use into GOPATH/bin
	$(GO) vet $(PKGS)
	cd bench/peers/river && GOWORK=off $(GO) vet ./... # the River peer benchmark, outside the workspace
	@bin=$$($(GO) env GOBIN); bin=$${bin:-$$($(GO) env GOPATH | cut -d: -f1)/bin}; \
	if ! "$$bin/golangci-lint" version 2>/dev/null | grep -q "version $(GOLANGCI_VERSION:v%=%) "; then \
		echo "installing golangci-lint $(GOLANGCI_VERSION) into $$bin (go install)"; \
		$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION) || exit 1; \
	fi; \
	echo "$$bin/golangci-lint run (every module)"; "$$bin/golangci-lint" run $(addsuffix /...,$(MODULES))

.PHONY: tidy
tidy: go-check ## go mod tidy in every module of the workspace, each on its own (GOWORK=off)
	@for d in $(MODULES); do echo "== $$d"; (cd $$d && GOWORK=off $(GO) mod tidy) || exit 1; done

.PHONY: demo-check
demo-check: deps-demo build ## Run the demo once in a throwaway data dir, wait for its processes, exit
	@dir=$$(mktemp -d); chmod 755 $$dir; $(BIN) dev --once --fresh --data-dir $$dir/dev; rc=$$?; rm -rf $$dir; exit $$rc

.PHONY: demo-smoke
demo-smoke: ## What CI runs: make demo in the background, dashboard up, processes done, Ctrl-C stops all
	scripts/demo-smoke.sh

.PHONY: screenshots
screenshots: deps ## Retake docs/images/dashboard.png and workflow-graph.png: the overview and a workflow while the demo runs (headless chromium)
	scripts/demo-screenshot.sh

.PHONY: demo-nonroot
demo-nonroot: ## demo-smoke as a new unprivileged user whose PATH has Go and no test tools (root; CI runs it)
	scripts/demo-nonroot.sh

# The HTTP API's description (openapi.yaml) and the Node tools that check it, pinned in
# api/package-lock.json (docs/api.md, "The OpenAPI description").
.PHONY: api-tools
api-tools: ## Install api/'s pinned Node tools (npm ci): redocly, openapi-typescript, openapi-fetch, tsx, typescript
	@command -v npm >/dev/null 2>&1 || { echo "api-tools needs node and npm (scripts/install-deps.sh test installs them)" >&2; exit 1; }
	cd api && npm ci --no-audit --no-fund

.PHONY: api-lint
api-lint: api-tools ## Validate openapi.yaml with redocly lint (its recommended rules, strict: api/redocly.yaml)
	cd api && ./node_modules/.bin/redocly lint --format=stylish ../openapi.yaml

.PHONY: api-check
api-check: api-lint deps-demo ## api-lint, then the spec against the server and a client generated from it in TypeScript driving a real taskorch api
	$(WITHPG) -- $(GO) test -count=1 -run 'TestOpenAPIMatchesServer|TestE2EAPIGeneratedTypeScriptClient' -v ./cmd/taskorch
