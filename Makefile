# toolgate — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

LOCALBIN := $(CURDIR)/bin
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT := $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
GO_TEST_FLAGS ?= -count=1 -timeout 30m
BENCH ?= .
BENCHTIME ?= 1s

.PHONY: all
all: build

.PHONY: help
help: ## Show targets.
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-12s %s\n", $$1, $$2}'

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from kubebuilder markers.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=toolgate-manager paths="./controllers/...;./webhook/...;./manager/..." output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths="./webhook/..." output:webhook:artifacts:config=config/webhook
	./hack/chart-crds.sh
	./hack/chart-reports-crds.sh

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -l -w $$(git ls-files '*.go' | grep -v '^hack/envtest/')

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint (depguard keeps engine/ free of Kubernetes).
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: generate manifests ## Regenerate and fail on a dirty tree.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts)" || { git status --porcelain -- api config charts; echo "untracked generated files: commit them"; exit 1; }

##@ Build and test

.PHONY: demo
demo: ## Bring up toolgate locally (control plane, operator, sidecar, samples) and show real decisions.
	go run ./hack/demo

.PHONY: demo-keep
demo-keep: ## The demo, left running until Ctrl-C.
	go run ./hack/demo -keep

.PHONY: build
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/toolgate/toolgate/cli.Version=$(VERSION) -X github.com/toolgate/toolgate/cli.Commit=$(COMMIT)

build: ## Build bin/toolgate.
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/toolgate ./cmd/toolgate

.PHONY: envtest
envtest: ## Build (once) the local control plane: kube-apiserver and etcd under bin/k8s/.
	./hack/setup-envtest.sh >/dev/null

.PHONY: setup-cluster
setup-cluster: ## Build (once) the real node: kubelet, controller-manager, scheduler, kube-proxy, containerd; apt-get runc and CNI plugins.
	./hack/setup-cluster.sh >/dev/null

.PHONY: test-cluster
test-cluster: setup-cluster ## As root: a real single-node cluster (in its own network namespace): helm install, agents under a real kubelet.
	go test -tags cluster $(GO_TEST_FLAGS) -v ./test/cluster/

# The image is tagged X.Y.Z for a vX.Y.Z tag, as the chart names it (appVersion).
IMAGE_REPOSITORY ?= toolgate.local/toolgate
IMAGE ?= $(IMAGE_REPOSITORY):$(patsubst v%,%,$(VERSION))
IMAGE_ARCHIVE ?= $(LOCALBIN)/toolgate-image.tar

.PHONY: image
image: ## Write the toolgate image (the Dockerfile's final stage) as an OCI archive, without Docker: $(IMAGE_ARCHIVE).
	go run ./hack/image -o $(IMAGE_ARCHIVE) -ref $(IMAGE) -version $(VERSION) -commit $(COMMIT)

DIST ?= $(CURDIR)/dist

.PHONY: release
release: ## A release into $(DIST), without Docker: make release VERSION=vX.Y.Z (docs/release.md).
	go run ./hack/release -check -version '$(VERSION)'
	$(MAKE) --no-print-directory typescript-client
	go run ./hack/release -version '$(VERSION)' -commit '$(COMMIT)' -dist '$(DIST)' -image-repository '$(IMAGE_REPOSITORY)'

.PHONY: test-release
test-release: ## make release VERSION=v0.0.0-test into a temporary directory, and check every artifact (test/release).
	go test -tags release $(GO_TEST_FLAGS) -v ./test/release/

.PHONY: test
test: test-go test-cluster-freeze test-clients test-rego test-promql test-otel test-policies test-release test-cluster ## Run every test: Go packages (envtest suites included; control plane built on first use), the cluster kill switch across 100 namespaces, the Python and TypeScript clients, OPA against the exported Rego, the alerts' PromQL, the OpenTelemetry spans, the samples' policy tests, a release built and checked (test-release), then, as root, the real-node suite.

.PHONY: test-go
test-go: ## Every Go package's tests.
	KUBEBUILDER_ASSETS="$$(./hack/setup-envtest.sh | tail -n 1)" go test $(GO_TEST_FLAGS) ./...

# 100 sidecar processes: alone, after test-go, so that its latency target is
# not judged while other packages' tests share the CPU.
.PHONY: test-cluster-freeze
test-cluster-freeze: ## One ClusterFrozenAgent, operator stopped, reaching 100 real sidecars in 100 namespaces (test/clusterfreeze, -tags clusterfreeze; p99 <= 1s, unselected namespaces untouched).
	KUBEBUILDER_ASSETS="$$(./hack/setup-envtest.sh | tail -n 1)" go test -tags clusterfreeze $(GO_TEST_FLAGS) ./test/clusterfreeze/

.PHONY: test-clients
test-clients: test-python test-typescript ## The Python and TypeScript clients against the real sidecar binary.

# A test that leaves a socket to the garbage collector fails, as does a
# socket still open after the last test: Python only warns (ResourceWarning,
# even -W error prints "Exception ignored" and goes on), so discovery goes
# through clients/python/tests/__init__.py, which collects after each test
# and fails on the warnings. PYTHONTRACEMALLOC=20 says where a leak was made.
.PHONY: test-python
test-python: build python-build-deps ## Python client (clients/python) tests against the real sidecar binary, built first.
	TOOLGATE_BIN=$(LOCALBIN)/toolgate python3 -m unittest discover -s clients/python/tests -t clients/python

# The Python client is built by setuptools' standard backend, offline
# (--no-build-isolation): python3 needs setuptools (pyenv's and python.org's
# Pythons have it), wheel (setuptools before 70.1 builds wheels through it)
# and venv (the install test).
.PHONY: python-build-deps
python-build-deps:
	@python3 -c 'import setuptools, wheel, venv' 2>/dev/null || { \
	  echo "python3 ($$(command -v python3)) cannot import setuptools, wheel or venv: the Python client's build and install test need them." >&2; \
	  echo "  wheel, on Debian or Ubuntu: apt-get install python3-wheel-whl && python3 -m pip install --no-index /usr/share/python-wheels/wheel-*.whl" >&2; \
	  echo "  setuptools likewise from python3-setuptools-whl; for Debian's own python3: apt-get install python3-setuptools python3-wheel python3-venv" >&2; \
	  exit 1; }

TS_CLIENT := clients/typescript

.PHONY: typescript-client
typescript-client: ## Install the TypeScript client's dev dependencies from its lockfile (when stale) and build it.
	cd $(TS_CLIENT) && if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
		npm ci --omit=optional --no-audit --no-fund; fi
	cd $(TS_CLIENT) && npm run --silent build

.PHONY: test-typescript
test-typescript: build typescript-client ## TypeScript client (@toolgate/client): type-check, node --test against bin/toolgate, the npm pack tarball installed and used as ESM and CJS (needs Node >= 20 and npm).
	cd $(TS_CLIENT) && npm run --silent typecheck
	cd $(TS_CLIENT) && TOOLGATE_BIN=$(LOCALBIN)/toolgate npm test

.PHONY: test-rego
test-rego: ## OPA v1.22.3 (a separate module, test/regodiff) against the engine on the exported Rego: samples, table cases, 20,000+ fuzzed requests.
	cd test/regodiff && go test $(GO_TEST_FLAGS) -v ./... | grep -Ev '^(=== RUN|    --- PASS)'

.PHONY: test-promql
test-promql: ## The chart's alert expressions parsed by Prometheus's own PromQL parser (a separate module, test/promql).
	cd test/promql && go test $(GO_TEST_FLAGS) ./...

.PHONY: test-policies
test-policies: build ## The samples' policy unit tests (config/samples, config/guardrails: *toolgate-test.yaml) through `toolgate test`, as a user's CI runs them.
	$(LOCALBIN)/toolgate test config/samples config/guardrails --coverage --junit $(LOCALBIN)/policy-tests.xml

.PHONY: measure-replay
measure-replay: ## toolgate replay over 100,000 decision-log lines against the samples: lines/s (target >= 100,000).
	go test ./cli -run '^$$' -bench BenchmarkReplay -benchtime 5x -count 3

.PHONY: test-otel
test-otel: ## The sidecar's OpenTelemetry spans, exported to the OpenTelemetry Collector's own OTLP receiver (a separate module, test/otel).
	cd test/otel && go test $(GO_TEST_FLAGS) ./...

.PHONY: rego-corpus
rego-corpus: ## Re-record the engine's table-test cases that test-rego decides with OPA (after changing those tests).
	go test -count=1 -run 'TestEvaluate|TestGateway|TestOperators' ./engine/ -write-corpus $(CURDIR)/test/regodiff/testdata/engine-cases.json

.PHONY: bench
bench: ## Engine and bundle-build benchmarks.
	go test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./engine/ ./engine/request/ ./controllers/

.PHONY: measure-operator
measure-operator: ## Publish latency on envtest: 100 Policy changes + 100 FrozenAgents, p50/p99 (target p99 <= 500ms).
	KUBEBUILDER_ASSETS="$$(./hack/setup-envtest.sh | tail -n 1)" go run ./test/latency

.PHONY: measure-scale
# SCALE_BASE is the revision whose manager is measured beside this one (the
# last before status writes stopped following every publish).
SCALE_BASE ?= 3a10af4
SCALE_NAMESPACES ?= 1000,10000
measure-scale: ## Cold start of 1,000 and 10,000 namespaces of 6 objects on envtest, real manager process, this build beside SCALE_BASE: all published, all Ready, peak RSS, update p50/p99, API writes per change (targets 5s / 10s at 1,000, 1.5 GiB at 10,000, p99 <= 1s, <= 3 writes).
	KUBEBUILDER_ASSETS="$$(./hack/setup-envtest.sh | tail -n 1)" go run ./test/scale -namespaces $(SCALE_NAMESPACES) -base $(SCALE_BASE)

.PHONY: measure-freeze
measure-freeze: ## Freeze-to-deny over 50 FrozenAgents: real manager and sidecar processes (target p99 <= 1s).
	KUBEBUILDER_ASSETS="$$(./hack/setup-envtest.sh | tail -n 1)" go run ./test/freezelatency

.PHONY: measure-approvals
measure-approvals: ## Approval status write -> held MCP call answered, 50 approvals: real manager, sidecar and MCP server (target p99 <= 1s).
	KUBEBUILDER_ASSETS="$$(./hack/setup-envtest.sh | tail -n 1)" go run ./test/approvallatency

.PHONY: measure-cluster-freeze
measure-cluster-freeze: ## ClusterFrozenAgent create -> AGENT_FROZEN in 100 namespaces, real sidecar processes, operator stopped: p50/p99/max (target p99 <= 1s).
	KUBEBUILDER_ASSETS="$$(./hack/setup-envtest.sh | tail -n 1)" go test -tags clusterfreeze -count=1 -v ./test/clusterfreeze/ | grep -E '^(ClusterFrozenAgent|--- |FAIL|ok)|sidecars serving'

.PHONY: measure-sidecar
measure-sidecar: ## Load a sidecar with a 1000-rule bundle over loopback: throughput, p50/p99 (target >= 20k/s, p99 <= 2ms).
	go run ./test/loadgen -self

.PHONY: measure-limits
measure-limits: ## Shared limits on a loopback redis-server: added latency per limited call beside a local limit and no limit, p50/p99 over 10,000 calls, and throughput of 3 sidecars against one Redis (targets p50 <= 150us, p99 <= 1ms added).
	go test ./test/sharedlimits -run '^$$' -bench BenchmarkMeasureLimits -benchtime 1x -count 1 -timeout 20m

.PHONY: measure-mcp
# MCP_BASE is the revision whose proxy is measured beside this one (the
# last before results were judged): the path without result rules, before
# and after, on the same calls.
MCP_BASE ?= 90bcecd
measure-mcp: ## tools/call with a 1 KiB argument and result, 10,000 calls, direct vs through the sidecar's MCP proxy without and with 10 result rules, and through the sidecar of MCP_BASE, the revision before (real processes): added p50/p99 side by side (target <= 200us / 1ms).
	go run ./test/mcplatency -base $(MCP_BASE)

.PHONY: measure-clients
measure-clients: typescript-client ## evaluate() from Python and Node against a 1000-rule sidecar (Unix socket, TCP), p50/p99, and Go in process (targets 150us / 1us).
	./hack/measure-clients.sh

.PHONY: diff-engine
diff-engine: ## Old vs new engine on 20,000 random ordered bundles (decisions, ids, reasons, codes, traces must be identical).
	./hack/diff-engine.sh

.PHONY: compare-engine
compare-engine: ## Engine benchmarks at the last commit before the gateway model and now, alternating, median change.
	./hack/compare-engine.sh

.PHONY: compare-opa
compare-opa: ## OPA (opa bench, built into bin/) on hand-written and on exported Rego, and the engine, on the same 1000-rule scenario, side by side.
	./hack/compare-opa.sh

.PHONY: compare-opa-server
compare-opa-server: ## Over HTTP, alternating: opa run --server (hand-written and exported 1000-rule Rego), the toolgate sidecar on the same bundle and a null server, on shared cores and on a core each (decisions/s, p50/p99, CPU per decision).
	./hack/compare-opa-server.sh

.PHONY: helm
helm: ## Build helm (once) into bin/.
	./hack/install-helm.sh

$(CONTROLLER_GEN):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(GOLANGCI_LINT):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@
