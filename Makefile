# flyte-manager: build, run, test and generate.
# `make run` and `make test` work on a fresh machine: every tool they need is
# installed on demand into bin/ (Go tools) or .venv/ (the pinned flyte SDK).

GO            ?= go
PYTHON        ?= python3
BIN           := $(CURDIR)/bin
VENV          := $(CURDIR)/.venv
WHEELS        := $(CURDIR)/.cache/wheels

# The SDK we are compatible with, and the flyteidl2 release it pins.
FLYTE_SDK_VERSION := 2.12.1
FLYTEIDL2_VERSION := 2.0.51
# uv, which builds the Python environments images become (docs/images.md);
# installed beside the SDK, where the manager looks for it.
UV_VERSION        := 0.13.8

# Code generators, pinned; installed with `go install` (no remote buf plugins).
BUF_VERSION          := v1.75.0
PROTOC_GEN_GO        := v1.36.12
PROTOC_GEN_CONNECT   := v1.21.1

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build run test test-short gen check-gen lint tools venv wheels clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/flyte-manager ./manager

## run: start the manager on its embedded default (SQLite, local blobs, local executor).
run: build venv
	$(BIN)/flyte-manager start

## test: every test, against real SQLite, PostgreSQL, the real flyte SDK and
## the test cluster (whose binaries envtest-assets builds into bin/k8s; with
## KUBEBUILDER_ASSETS pointing there the cluster tests fail, never skip, when
## they are unusable).
## On failure, hack/test-failures repeats what failed at the end.
test: venv wheels envtest-assets helm
	@log=$$(mktemp); \
	{ FLYTEIDL2_WHEEL=$(WHEELS)/flyteidl2-$(FLYTEIDL2_VERSION)-py3-none-any.whl \
	  FM_TEST_VENV=$(VENV) KUBEBUILDER_ASSETS=$(K8S_BIN) \
	  $(GO) test -p 2 -timeout 40m ./... 2>&1; echo $$? > $$log.rc; } | tee $$log; \
	rc=$$(cat $$log.rc); \
	if [ "$$rc" != 0 ]; then hack/test-failures $$log; fi; \
	rm -f $$log $$log.rc; exit $$rc
	$(GO) test -count=1 -tags failpoints ./internal/failpoint/

## reliability: the long fault and fuzz suites (about 35 minutes): the whole
## crash matrix (every failpoint on SQLite and PostgreSQL), a longer database
## outage, 20,000 generated requests over every procedure, then ten minutes of
## coverage-guided fuzzing per target. `make test` runs a short version of each.
.PHONY: reliability
FUZZTIME ?= 10m
reliability: venv wheels
	FM_RELIABILITY=full FM_TEST_VENV=$(VENV) \
	$(GO) test -count=1 -v -timeout 60m -run 'TestFaultCrashMatrix|TestFaultDatabaseOutage' ./e2e/
	FM_FUZZ_N=20000 $(GO) test -count=1 -v -run TestFuzzProcedures ./manager/
	$(GO) test -run '^$$' -fuzz '^FuzzProcedureGenerated$$' -fuzztime $(FUZZTIME) ./manager/
	$(GO) test -run '^$$' -fuzz '^FuzzProcedureWire$$' -fuzztime $(FUZZTIME) ./manager/

## gen: regenerate gen/go from flyteidl2/ with the pinned local plugins.
gen: tools
	cd $(CURDIR) && PATH=$(BIN):$$PATH $(BIN)/buf generate

## check-gen: fail if gen/go is not exactly what `make gen` produces.
check-gen: gen
	@git diff --exit-code -- gen/go || (echo "gen/go is stale: run make gen and commit" && exit 1)
	@test -z "$$(git status --porcelain -- gen/go)" || (git status --porcelain -- gen/go; echo "gen/go has untracked output: run make gen and commit" && exit 1)

## check-manifests: fail if the executor's generated files (CRD, RBAC, deepcopy,
## sample, the chart's CRD and role copies) differ from what `make -C executor manifests
## generate` produces.
.PHONY: check-manifests
EXECUTOR_GENERATED := executor/config/crd executor/config/rbac/role.yaml executor/config/rbac-per-project/role.yaml \
	executor/config/samples executor/api charts/flyte-binary/templates/crds charts/flyte-binary/files
check-manifests:
	$(MAKE) -C executor manifests generate
	@git diff --exit-code -- $(EXECUTOR_GENERATED) || (echo "executor manifests are stale: run make -C executor manifests generate and commit" && exit 1)
	@test -z "$$(git status --porcelain -- $(EXECUTOR_GENERATED))" || (git status --porcelain -- $(EXECUTOR_GENERATED); echo "executor has untracked generated files: run make -C executor manifests generate and commit" && exit 1)

## envtest-assets: kube-apiserver, etcd and kubectl for the test cluster, built
## from Go modules (tools/k8s pins the versions) into bin/k8s/. Several minutes
## the first time; skipped while the binaries of the pinned versions are there.
## Tests find them there, or in $KUBEBUILDER_ASSETS. bin/kubectl links to kubectl.
.PHONY: envtest-assets test-cluster test-cluster-stop
K8S_BIN      := $(BIN)/k8s
K8S_VERSION  := $(shell awk '$$1 == "k8s.io/kubernetes" && NF >= 2 { print $$2; exit }' tools/k8s/go.mod)
ETCD_VERSION := $(shell awk '$$1 == "go.etcd.io/etcd/server/v3" && NF >= 2 { print $$2; exit }' tools/k8s/go.mod)
K8S_STAMP    := $(K8S_BIN)/.built-kubernetes-$(K8S_VERSION)-etcd-$(ETCD_VERSION)
# The version the binaries report (a release build stamps it the same way).
K8S_LDFLAGS  := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=$(word 2,$(subst ., ,$(K8S_VERSION:v%=x.%))) \
  -X $(p).gitMinor=$(word 3,$(subst ., ,$(K8S_VERSION:v%=x.%))) -X $(p).gitTreeState=clean)
K8S_BUILD    := cd tools/k8s && GOWORK=off GOFLAGS=-mod=mod $(GO) build -trimpath -ldflags "$(K8S_LDFLAGS)"
envtest-assets:
	@if [ -f $(K8S_STAMP) ] && [ -x $(K8S_BIN)/kube-apiserver ] && [ -x $(K8S_BIN)/etcd ] && [ -x $(K8S_BIN)/kubectl ]; then \
	  echo "envtest assets: kube-apiserver and kubectl $(K8S_VERSION), etcd $(ETCD_VERSION) in $(K8S_BIN)"; \
	else \
	  echo "building kube-apiserver and kubectl $(K8S_VERSION), etcd $(ETCD_VERSION) from Go modules into $(K8S_BIN)"; \
	  rm -f $(K8S_BIN)/.built-* && \
	  ($(K8S_BUILD) -o $(K8S_BIN)/etcd go.etcd.io/etcd/server/v3) && \
	  ($(K8S_BUILD) -o $(K8S_BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver) && \
	  ($(K8S_BUILD) -o $(K8S_BIN)/kubectl k8s.io/kubernetes/cmd/kubectl) && \
	  touch $(K8S_STAMP); \
	fi
	@ln -sfn k8s/kubectl $(BIN)/kubectl

## test-cluster: etcd, kube-apiserver and a node agent that runs Pods as local
## processes, in the background; writes bin/test-cluster/kubeconfig and
## bin/test-cluster/manager.yaml (kubernetes mode on that cluster) and prints
## how to use them. TEST_CLUSTER_FLAGS passes e.g. "--runner noop".
## test-cluster-stop: stops it, kills its Pod processes, removes bin/test-cluster.
TEST_CLUSTER_DIR   := $(BIN)/test-cluster
TEST_CLUSTER_FLAGS ?=
test-cluster: envtest-assets
	$(GO) build -o $(K8S_BIN)/test-cluster ./executor/cmd/test-cluster
	$(K8S_BIN)/test-cluster start --dir $(TEST_CLUSTER_DIR) --assets $(K8S_BIN) $(TEST_CLUSTER_FLAGS)

test-cluster-stop:
	$(GO) build -o $(K8S_BIN)/test-cluster ./executor/cmd/test-cluster
	$(K8S_BIN)/test-cluster stop --dir $(TEST_CLUSTER_DIR)

## image: the manager's OCI image, built without a container daemon by
## hack/image: the static binary, CA certificates, user 65532, entrypoint
## `flyte-manager start`, for IMAGE_PLATFORMS; written to dist/image as an OCI
## layout, an OCI archive and one docker-archive per platform (docs/image.md).
## Two builds of one commit give one digest.
.PHONY: image
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_SOURCE    ?= https://github.com/flyte-manager/flyte-manager
image:
	$(GO) run ./hack/image -o dist/image -platforms $(IMAGE_PLATFORMS) -version $(VERSION) \
	  -revision $$(git rev-parse HEAD 2>/dev/null || echo unknown) -source $(IMAGE_SOURCE) \
	  -epoch $$(git log -1 --format=%ct 2>/dev/null || echo 0)

## sandbox-image: hack/sandbox: a Debian root filesystem (mmdebstrap, as root)
## with Python, flyte==$(FLYTE_SDK_VERSION) and uv in /opt/flyte, the static
## manager, entrypoint `flyte-manager sandbox`; written to dist/sandbox as an
## OCI layout and archives for the host's architecture (docs/sandbox.md). The
## wheels and the root filesystem are cached under .cache/sandbox.
.PHONY: sandbox-image test-sandbox
SANDBOX_CACHE ?= .cache/sandbox
sandbox-image: venv
	$(GO) run ./hack/sandbox -o dist/sandbox -cache $(SANDBOX_CACHE) -sdk $(FLYTE_SDK_VERSION) -uv $(UV_VERSION) -pip $(VENV)/bin/pip \
	  -version $(VERSION) -revision $$(git rev-parse HEAD 2>/dev/null || echo unknown) \
	  -epoch $$(git log -1 --format=%ct 2>/dev/null || echo 0)

## test-sandbox: builds the sandbox image and runs it with runc under the
## devbox contract (the SDK quick start, kubectl, a restart, no volumes).
test-sandbox: sandbox-image
	FM_SANDBOX_TEST=1 FM_SANDBOX_IMAGE=$(CURDIR)/dist/sandbox/oci FM_TEST_VENV=$(VENV) \
	  $(GO) test -p 1 -count=1 -timeout 20m -v -run TestSandbox ./hack/sandbox/

## helm: bin/helm, built from its Go module (tools/helm pins the version);
## rebuilt when tools/helm/go.mod changes. The chart's tests use it, or $FM_HELM.
.PHONY: helm
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v4" && NF >= 2 { print $$2; exit }' tools/helm/go.mod)
helm: $(BIN)/helm
$(BIN)/helm: tools/helm/go.mod tools/helm/go.sum
	cd tools/helm && GOWORK=off GOFLAGS=-mod=mod $(GO) build -trimpath \
	  -ldflags "-X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" -o $(BIN)/helm helm.sh/helm/v4/cmd/helm

## bench: actions/s and submit→terminal latency through the public API, on
## SQLite and PostgreSQL, with the no-op runner (control plane only), the
## real a0 runner and the kubernetes executor on the test cluster (kube: also
## API writes and PostgreSQL transactions per action); the noop scale series
## (one run with 100, 1,000 and 10,000 children: wall, peak RSS, statements
## per action) and curves (actions/s against fan-out width and runs in
## flight); one run fanning out to 300 real children on SQLite; the web
## console's action tree of 1,000 and 10,000 actions drawn in headless
## Chromium (runner console: folded and open). Every figure
## beside issue 10's target and its ratio to the figures before; prints
## figures, asserts nothing. BENCH_FLAGS passes sizes and selections, e.g.
## BENCH_FLAGS="-runners noop -scale 10000 -curve-fanout '' -curve-inflight ''",
## BENCH_FLAGS="-warm both" or BENCH_FLAGS="-runners kube -kube-runs 500" (go run ./bench -h).
.PHONY: bench
BENCH_FLAGS ?=
bench: venv envtest-assets
	$(GO) build -tags bench -ldflags "$(LDFLAGS)" -o $(BIN)/flyte-manager-bench ./manager
	$(GO) run ./bench -manager $(BIN)/flyte-manager-bench -venv $(VENV) $(BENCH_FLAGS)

## bench-compare: make bench, each noop and a0 scenario measured first on
## the manager of git revision BEFORE (default main), then on this
## checkout's, one after the other on the same machine; the summary shows
## both. E.g. make bench-compare BEFORE=516e1d4 BENCH_FLAGS="-runners noop".
.PHONY: bench-compare
BEFORE ?= main
bench-compare: venv envtest-assets
	$(GO) build -tags bench -ldflags "$(LDFLAGS)" -o $(BIN)/flyte-manager-bench ./manager
	rm -rf $(BIN)/before-src && git worktree prune && git worktree add --detach $(BIN)/before-src $(BEFORE)
	cd $(BIN)/before-src && $(GO) build -tags bench -o $(BIN)/flyte-manager-before ./manager; \
	  rc=$$?; cd $(CURDIR) && git worktree remove --force $(BIN)/before-src; exit $$rc
	$(GO) run ./bench -manager $(BIN)/flyte-manager-bench -before $(BIN)/flyte-manager-before -venv $(VENV) $(BENCH_FLAGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-connect-go

$(BIN)/buf:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO)
$(BIN)/protoc-gen-connect-go:
	GOBIN=$(BIN) $(GO) install connectrpc.com/connect/cmd/protoc-gen-connect-go@$(PROTOC_GEN_CONNECT)

## venv: the Python environment with the pinned SDK (provides `a0` and `flyte`)
## and uv (builds the environments of tasks' images).
venv: $(VENV)/.flyte-$(FLYTE_SDK_VERSION) $(VENV)/.uv-$(UV_VERSION)
$(VENV)/.flyte-$(FLYTE_SDK_VERSION):
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check flyte==$(FLYTE_SDK_VERSION)
	touch $@
$(VENV)/.uv-$(UV_VERSION): $(VENV)/.flyte-$(FLYTE_SDK_VERSION)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	touch $@

## wheels: the official flyteidl2 wheel that the conformance test reads.
wheels: $(WHEELS)/flyteidl2-$(FLYTEIDL2_VERSION)-py3-none-any.whl
$(WHEELS)/flyteidl2-$(FLYTEIDL2_VERSION)-py3-none-any.whl: | venv
	$(VENV)/bin/pip download --quiet --disable-pip-version-check --no-deps flyteidl2==$(FLYTEIDL2_VERSION) -d $(WHEELS)

clean:
	rm -rf $(BIN) .cache
