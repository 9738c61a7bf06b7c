# ModelServer Operator

# Image of the operator (also runs the model-fetch Job).
IMG ?= ghcr.io/modelserver-dev/modelserver-operator:$(VERSION)
VERSION ?= 0.1.0
# A container tool is not needed to build or test; only the image targets use it.
CONTAINER_TOOL ?= docker

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

LOCALBIN ?= $(CURDIR)/bin
export PATH := $(LOCALBIN):$(PATH)
# bin/<tool> is a link into the directory its module's build wrote; a link
# is as new as itself, not as the binary it names, so a built tool is not
# linked again on every run (and `make -q tools` can tell it is built).
MAKEFLAGS += --check-symlink-times

# This module's code is vetted, tested and built as its image is built:
# CGO_ENABLED=0 -trimpath. The binaries the suites build (the operator's
# image, test servers, `go build` in tests) then reuse what `go vet` and
# `go test` compiled; with the default cgo build, a cold cache compiled
# every dependency twice: on two cores, vet, test binaries and the image
# took 1,170 s, of which the image 393 s; built alike, 837 s, the image 8 s.
# The pinned tools build so too, except the Kubernetes ones (below).
# Binaries are linked without DWARF (-w), as Kubernetes' own release builds
# are: stack traces and profiles need only the line tables Go keeps, and a
# test binary links in two thirds of the time (controllers': 12.9 s, 8.6 s).
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath -ldflags=-w)

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(LOCALBIN)/controller-gen ## Generate the CRD and RBAC manifests from the Go types' markers.
	controller-gen rbac:roleName=manager-role crd paths="./api/..." paths="./controllers/..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(LOCALBIN)/controller-gen ## Generate DeepCopy methods.
	controller-gen object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: docs
docs: docs-api docs-explain ## Regenerate docs/api-reference.md (from the Go types) and docs/kubectl-explain.md (from a local control plane).

.PHONY: docs-api
docs-api: $(LOCALBIN)/crd-ref-docs ## Generate docs/api-reference.md from the Go types in api/.
	crd-ref-docs --config hack/apidocs/config.yaml --source-path ./api \
		--renderer markdown --output-path docs/api-reference.md --log-level ERROR

.PHONY: docs-explain
docs-explain: tools ## Regenerate docs/kubectl-explain.md: kubectl explain of every ModelServer field, against a local control plane.
	UPDATE_DOCS=1 go test -count=1 ./test/e2e/ -run '^TestKubectlExplainOfEveryFieldMatchesTheDocs$$'

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet, also over the fetcher's benchmark variants (bench-fetch).
	go vet ./...
	go vet -tags fetchbench_nohash,fetchbench_noflush,fetchbench_xxh3 ./internal/fetch ./cmd/fetcher

# The benchmarks' modules, each with its own go.mod.
BENCH_MODULES := test/bench test/bench/peer test/fetchbench
# Test modules with a go.mod of their own: Prometheus's rule engine stays
# out of the operator's.
TEST_MODULES := test/alerts

# golangci-lint's linters and why each is on are in .golangci.yml.
.PHONY: lint
lint: vet vet-bench $(LOCALBIN)/golangci-lint ## Fail on unformatted code, vet and golangci-lint findings, in this module, the benchmarks' and the test modules.
	@echo ">> $(now) $@"
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi
	golangci-lint run ./...
	for m in $(BENCH_MODULES) $(TEST_MODULES); do (cd $$m && golangci-lint run ./...) || exit 1; done

.PHONY: verify-shared-deps
# The splits allowed. Sprig's cast and mergo: Helm pins sprig, which needs
# cast 1.7.0, in the operator's module (and so in the modules that share
# its pins); operator-sdk's viper needs cast 1.10.0. Raising the operator's
# would change what its chart's template functions do, for five packages
# (sprig and four of Helm's) compiled twice. The terminal checks: versitygw
# needs newer ones than the rest pin, for two small packages.
verify-shared-deps: export SHARED_DEPS_SPLIT = github.com/spf13/cast dario.cat/mergo github.com/mattn/go-isatty github.com/mattn/go-colorable
verify-shared-deps: ## Fail if a package two of the builds (this module's, hack/tools', kwok's, OLM's, operator-sdk's, versitygw's, a benchmark's) both compile is pinned at different versions (a cold build would compile it twice).
	@echo ">> $(now) $@"
	hack/verify-shared-deps.sh $(BENCH_MODULES) $(TEST_MODULES) \
		'hack/tools=$(subst $(space),$(comma),$(strip $(HACK_TOOLS_PKGS)))' hack/tools/kwok=$(KWOK_PKG) \
		'hack/tools/olm=$(subst $(space),$(comma),$(strip $(OLM_TOOLS_PKGS)))' \
		'hack/tools/operator-sdk=$(subst $(space),$(comma),$(strip $(OPERATOR_SDK_PKGS)))' \
		hack/tools/versitygw=$(VERSITYGW_PKG)

.PHONY: verify-generated
verify-generated: manifests generate docs-api prometheus-operator-crds ## Fail if generated files differ from what is committed.
	@echo ">> $(now) $@"
	@changed=$$(git status --porcelain -- config/ api/ docs/ $(PROMETHEUS_OPERATOR_CRDS)); if [ -n "$$changed" ]; then \
		echo "generated files differ from the commit: run 'make manifests generate docs' and commit:"; echo "$$changed"; exit 1; fi

# Packages whose tests need no cluster, and those that start the local control plane.
# The suites that take the machine's one real node (test/realnode,
# test/olm, test/olmv1, and a test or two of internal/localcluster's and
# test/e2e's) take it in turn, and their sum is the phase's floor. go test
# starts packages in this order, three at a time (CLUSTER_PARALLEL): the
# real node's suites go first and one after another, the others beside
# them, with internal/localcluster, whose real-node tests come last, at the
# end. The third lets the next real-node suite build its images while the
# node is still held; two at a time, it started only when the suite before
# it ended, and the node stood idle for its build (37 to 84 s a suite).
CLUSTER_PKGS := ./test/realnode/... ./controllers/... ./test/e2e/... ./test/olm/... ./test/olmv1/... ./internal/localcluster/...
CLUSTER_PARALLEL ?= 3
UNIT_PKGS = $(shell go list ./... | grep -v -e /internal/localcluster -e /controllers -e /test/e2e -e /test/realnode -e '/test/olm$$' -e /test/olmv1)

# now is the time of day, for the ">>" lines that mark where a build or a
# test run spends its minutes in a CI log.
now = $$(date -u +%T)

.PHONY: test
# The cluster suites mostly wait, on the apiserver, the kubelet, OLM and the
# machine's one real node, while lint and the unit tests (which build the
# operator for arm64) mostly compute, so the two run side by side. What
# writes the tree (the generated files' and OLM artifacts' checks) and
# go vet, which compiles every package both link, come first; the two
# sides do not check again what this target's prerequisites did (-o).
# Each side runs in a process group of its own, and the shell waits for
# both with `wait`, which a signal interrupts: an interrupt of make's
# group, or a SIGTERM to make alone (which make passes to this shell),
# reaches both sides at once as SIGINT, and make ends once their tests
# have cleaned up. (A background job's SIGINT is ignored, and a trap
# waits for a foreground command to end.)
TEST_DONE := -o vet -o tools -o node-deps -o bundlegen
test: vet image-deps verify-generated verify-shared-deps verify-olm tools node-deps bundlegen ## Lint, generated files, OLM bundle and unit tests, beside the suites that run against the local control plane.
	@set -m; $(MAKE) --no-print-directory $(TEST_DONE) test-cluster & cluster=$$!; \
	$(MAKE) --no-print-directory $(TEST_DONE) lint test-olm test-unit test-alerts & rest=$$!; set +m; \
	trap 'kill -INT -- -$$cluster -$$rest 2>/dev/null' INT TERM; \
	waitfor() { local rc; while :; do wait "$$1" && rc=0 || rc=$$?; kill -0 "$$1" 2>/dev/null || return $$rc; done; }; \
	rc=0; waitfor $$rest || rc=$$?; waitfor $$cluster || rc=1; exit $$rc

# The image's packages for arm64, compiled once before the two sides of
# `make test`, as vet compiles them for amd64: the real node's suites build
# the operator's image for both architectures and cmd/image's unit test
# for arm64, and on a cold cache each compiled them at the same time as
# the other, beside lint. So the real node's environment, which builds
# its images before taking the node, once ran out of its 10 minutes to
# start. `go build` of two main packages links neither.
.PHONY: image-deps
image-deps: ## Compile the operator image's packages for linux/arm64 (what `make test`'s two sides both link).
	@echo ">> $(now) $@"
	GOOS=linux GOARCH=arm64 go build ./cmd/manager ./cmd/fetcher

.PHONY: test-unit
test-unit: ## Unit tests (no cluster).
	@echo ">> $(now) $@"
	go test $(UNIT_PKGS)

# The Prometheus Operator's ServiceMonitor and PrometheusRule CRDs, made by
# controller-gen from its API module at the version
# hack/tools/prometheus-operator pins (its releases' CRDs are made so too),
# for the real-node test that applies dist/monitoring.yaml to the apiserver
# with their schemas.
PROMETHEUS_OPERATOR_CRDS := test/testdata/prometheus-operator
.PHONY: prometheus-operator-crds
prometheus-operator-crds: $(LOCALBIN)/controller-gen ## Generate the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs into test/testdata.
	rm -rf $(PROMETHEUS_OPERATOR_CRDS).tmp
	cd hack/tools/prometheus-operator && controller-gen crd:crdVersions=v1 paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
		output:crd:artifacts:config=$(CURDIR)/$(PROMETHEUS_OPERATOR_CRDS).tmp
	mkdir -p $(PROMETHEUS_OPERATOR_CRDS)
	for k in servicemonitors prometheusrules; do mv $(PROMETHEUS_OPERATOR_CRDS).tmp/monitoring.coreos.com_$$k.yaml $(PROMETHEUS_OPERATOR_CRDS)/ || exit 1; done
	rm -rf $(PROMETHEUS_OPERATOR_CRDS).tmp

.PHONY: test-alerts
test-alerts: ## Run the alerting rules (config/prometheus) in Prometheus's rule engine on the operator's metrics (test/alerts).
	@echo ">> $(now) $@"
	cd test/alerts && go vet ./... && go test -count=1 ./...

.PHONY: test-cluster
# The real-node suites take the machine's one real node in turn, so a
# package's time includes waiting for the others.
test-cluster: tools node-deps bundlegen ## Suites that start a local control plane (etcd, kube-*, kwok) and, where the machine can run containers, a real node.
	@echo ">> $(now) $@"
	go test -count=1 -timeout 60m -p $(CLUSTER_PARALLEL) $(CLUSTER_PKGS)

.PHONY: test-e2e
test-e2e: tools build ## End-to-end tests: the operator binary against the local control plane.
	go test -count=1 -timeout 25m ./test/e2e/...

.PHONY: test-real-node
test-real-node: tools node-deps ## The real-node suites: the operator from its image, real fetches from a real S3 server, teardown.
	go test -count=1 -timeout 25m -run 'RealNode' ./internal/localcluster/
	go test -count=1 -timeout 25m ./test/realnode/...

.PHONY: test-olm-install
test-olm-install: tools node-deps bundlegen ## OLM for real on the real node: OLM v0 (Subscriptions, upgrades), OLM v1, operator-sdk run bundle and scorecard.
	go test -count=1 -timeout 60m ./test/olm/... ./test/olmv1/...

.PHONY: demo
demo: tools ## Show the operator serving a model until Ready: on a real node where the machine can run containers, else on kwok (DEMO_SIMULATED=1 forces kwok; DEMO_EXIT_WHEN_READY=1 exits when Ready).
	go run ./cmd/demo

##@ Reliability
# The reliability suites run in `make test` (the crash loop with
# CRASH_ITERATIONS=6, its default); test-soak runs the crash loop at its
# full count, and reliability-report writes docs/reliability.md from the
# suites' `go test -json` output.

SOAK_CRASH_ITERATIONS ?= 24
FUZZTIME ?= 60s
RELIABILITY_E2E := TestKillingTheOperator|TestWhenTheLeader|TestTheOperatorRetries|TestTheOperatorConverges|TestAnObjectOfTheUsers|TestDeletingAModelServerLeaves|TestMalformed|TestSpecsTheSchema|TestCredentialsNever
RELIABILITY_RUNS := \
	CRASH_ITERATIONS=$(SOAK_CRASH_ITERATIONS) go test -json -count=1 -timeout 30m -run '$(RELIABILITY_E2E)' ./test/e2e/... ; \
	go test -json -count=1 -run 'TestRestartedAPIServer' ./internal/localcluster/... ; \
	go test -json -count=1 ./test/posture/... ./test/faultproxy/... ./internal/release/... ; \
	go test -json -count=1 -run 'Fuzz|TestBadSpecs|TestModelConfig' ./internal/values/... ./helm-charts/...

.PHONY: test-soak
test-soak: tools ## The operator crash loop at its full count (SOAK_CRASH_ITERATIONS kills).
	CRASH_ITERATIONS=$(SOAK_CRASH_ITERATIONS) go test -count=1 -timeout 30m -v -run 'TestKillingTheOperator' ./test/e2e/...

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (the seeds alone run in test-unit).
	go test -run '^$$' -fuzz '^FuzzModelConfig$$' -fuzztime $(FUZZTIME) ./internal/values
	go test -run '^$$' -fuzz '^FuzzSpecToManifests$$' -fuzztime $(FUZZTIME) ./helm-charts

.PHONY: reliability-report
reliability-report: tools ## Run the reliability suites and write docs/reliability.md from their output (fails if any test failed).
	@mkdir -p docs; set +e; out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	{ $(RELIABILITY_RUNS) ; } > $$out 2>&1; \
	go run ./hack/reliabilityreport -o docs/reliability.md -command "$(subst ",\",$(subst $$,$$$$,$(RELIABILITY_RUNS)))" < $$out

##@ Benchmark
# The benchmark, the peer it compares against and the fetch benchmark are
# Go modules of their own (plotting and helm-operator-plugins stay out of
# go.mod). They are vetted and their unit tests run with every `make test`,
# so they do not rot; `make bench` itself takes from minutes (BENCH_N=1) to
# an hour.
BENCH_N ?= 1,100,1000
BENCH_FLAGS ?=

.PHONY: vet-bench
vet-bench: ## Vet and unit-test the benchmark harnesses and the peer operator.
	cd test/bench && go vet ./... && go test -count=1 ./...
	cd test/bench/peer && go vet ./...
	cd test/fetchbench && go vet ./... && go test -count=1 ./...

.PHONY: bench
bench: tools ## Benchmark the operator and the peer for BENCH_N ModelServers; results in test/bench/results.
	cd test/bench && go run . -n '$(BENCH_N)' $(BENCH_FLAGS)

# bench-real-node times what kwok's pods cannot show: a ModelServer (2
# replicas, a 12 kB model from the real S3 server) from `kubectl apply` to
# Ready on the real node, through real containers and the kubelet's probes,
# step by step, REAL_NODE_RUNS times one after another; then a change of its
# model, to Ready with the new one; then a model that takes 20 s to load
# (REALNODE_LOAD_SECONDS=60 for another time). Needs root, like the
# real-node suites.
REAL_NODE_RUNS ?= 8
.PHONY: bench-real-node
bench-real-node: tools node-deps ## Time ModelServers from kubectl apply to Ready on the real node, step by step: new, a new model, a slow load.
	go test -count=1 -run '^$$' -bench 'ToReady$$' -benchtime $(REAL_NODE_RUNS)x -v -timeout 60m ./test/realnode

# bench-fetch times the fetcher (`fetcher fetch`) against s5cmd and rclone on the same
# models from the same versitygw (test/fetchbench, a module of its own). The
# two clients are pinned in hack/tools/s3tools and built by one `go build`,
# so the packages they share compile once, into a directory named after the
# pins with bin/s5cmd and bin/rclone linking into it. Neither is part of
# `make tools`: only this benchmark needs them, and a cold build takes minutes.
FETCHBENCH_FLAGS ?=
S3TOOLS_MOD := hack/tools/s3tools
S5CMD_VERSION = $(call modver,$(S3TOOLS_MOD)/go.mod,github.com/peak/s5cmd/v2)
RCLONE_VERSION = $(call modver,$(S3TOOLS_MOD)/go.mod,github.com/rclone/rclone)
S3TOOLS_DIR := $(LOCALBIN)/s3tools-$(shell cat $(S3TOOLS_MOD)/go.mod $(S3TOOLS_MOD)/go.sum | sha256sum | cut -c1-12)
$(S3TOOLS_DIR)/.built:
	@mkdir -p $(LOCALBIN)
	@echo ">> $(now) building s5cmd $(S5CMD_VERSION) and rclone $(RCLONE_VERSION)"
	rm -rf $(@D).tmp
	cd $(S3TOOLS_MOD) && CGO_ENABLED=0 go build -trimpath \
		-ldflags '-X github.com/peak/s5cmd/v2/version.Version=$(S5CMD_VERSION) -X github.com/rclone/rclone/fs.Version=$(RCLONE_VERSION)' \
		-o $(@D).tmp/ github.com/peak/s5cmd/v2 github.com/rclone/rclone
	touch $(@D).tmp/.built
	rm -rf $(@D) && mv $(@D).tmp $(@D)
$(LOCALBIN)/s5cmd $(LOCALBIN)/rclone: $(S3TOOLS_DIR)/.built
	ln -sfn $(notdir $(S3TOOLS_DIR))/$(@F) $@

.PHONY: bench-fetch-tools
bench-fetch-tools: $(LOCALBIN)/s5cmd $(LOCALBIN)/rclone ## Build s5cmd and rclone, the clients bench-fetch compares with, into bin/.

# The fetcher (built as the image builds it) and the harness are built into
# bin/fetchbench rather than run with `go run`, which exits 1 on Ctrl-C
# whatever the program does. Beside the fetcher, the variants the harness's
# ours-* tools run: suffix:tags, as test/fetchbench/tools.go names them (a
# test there fails if the two lists part).
FETCHBENCH_VARIANTS := nohash:fetchbench_nohash noflush:fetchbench_noflush bare:fetchbench_nohash,fetchbench_noflush xxh3:fetchbench_xxh3
.PHONY: bench-fetch
bench-fetch: bench-fetch-tools $(LOCALBIN)/versitygw ## Time the fetcher, s5cmd and rclone fetching three model shapes from versitygw; results in test/bench/results.
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o $(LOCALBIN)/fetchbench/fetcher ./cmd/fetcher
	for v in $(FETCHBENCH_VARIANTS); do \
		CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -tags $${v#*:} -o $(LOCALBIN)/fetchbench/fetcher-$${v%%:*} ./cmd/fetcher || exit 1; \
	done
	cd test/fetchbench && go build -o $(LOCALBIN)/fetchbench/ . ./spawn
	$(LOCALBIN)/fetchbench/fetchbench -bin $(LOCALBIN) -fetcher $(LOCALBIN)/fetchbench/fetcher -out test/bench/results $(FETCHBENCH_FLAGS)

# REAL_NODE=1 makes cluster-up run the real-node environment the real-node
# tests use, which needs the node's Debian packages too. Built, not `go
# run`: go run exits 1 on Ctrl-C whatever the program does, and the clean
# stop is the command's exit 0.
REAL_NODE ?=
.PHONY: cluster-up
cluster-up: tools $(if $(filter 1,$(REAL_NODE)),node-deps) ## Run a local control plane in the foreground; prints the KUBECONFIG to export. REAL_NODE=1: a real node (root), registry, S3 server with test models, the operator from its image.
	go build -o $(LOCALBIN)/localcluster ./cmd/localcluster
	$(LOCALBIN)/localcluster $(if $(filter 1,$(REAL_NODE)),-real-node)

##@ Build

.PHONY: build
build: ## Build the operator and the fetcher into bin/manager and bin/fetcher.
	CGO_ENABLED=0 go build -trimpath -o $(LOCALBIN)/ ./cmd/manager ./cmd/fetcher

.PHONY: run
run: ## Run the operator against the cluster in $KUBECONFIG.
	go run ./cmd/manager

.PHONY: docker-build
docker-build: ## Build the operator image (needs a container engine).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	$(CONTAINER_TOOL) push $(IMG)

# The platforms of the operator's image, as `make image` builds them too.
PLATFORMS ?= linux/amd64,linux/arm64
.PHONY: docker-buildx
docker-buildx: ## Build the operator image for $(PLATFORMS) and push it as one index (needs docker buildx).
	$(CONTAINER_TOOL) buildx build --platform=$(PLATFORMS) --push -t $(IMG) .

REGISTRY ?= 127.0.0.1:5000
.PHONY: image
image: ## Build the operator image for linux/amd64 and linux/arm64 (no container engine needed) and push it to $(REGISTRY) (a local registry: make registry, or make cluster-up REAL_NODE=1).
	go run ./cmd/image --push $(REGISTRY)/modelserver-operator:$(VERSION)

.PHONY: registry
registry: ## Run a local OCI registry on $(REGISTRY) in the foreground.
	go run ./cmd/registry --addr $(REGISTRY)

##@ Deployment

.PHONY: install
install: manifests $(LOCALBIN)/kustomize $(LOCALBIN)/kubectl ## Install the CRDs into the cluster in $KUBECONFIG.
	kustomize build config/crd | kubectl apply --server-side -f -

.PHONY: uninstall
uninstall: $(LOCALBIN)/kustomize $(LOCALBIN)/kubectl ## Remove the CRDs (and with them every ModelServer).
	kustomize build config/crd | kubectl delete --ignore-not-found -f -

.PHONY: deploy
deploy: manifests $(LOCALBIN)/kustomize $(LOCALBIN)/kubectl ## Deploy the operator to the cluster in $KUBECONFIG.
	cd config/manager && kustomize edit set image controller=$(IMG)
	kustomize build config/default | kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: $(LOCALBIN)/kustomize $(LOCALBIN)/kubectl ## Remove the operator.
	kustomize build config/default | kubectl delete --ignore-not-found -f -

##@ OLM
# The OLM bundle (bundle/, bundle.Dockerfile), the file-based catalog
# (catalog/) and the single-file install (dist/install.yaml) are made from
# config/ by hack/olm/cmd/bundlegen, a Go module of its own so that
# operator-framework's dependencies stay out of go.mod, and are committed:
# verify-olm fails when they differ from what config/ gives.

CHANNELS ?= candidate
DEFAULT_CHANNEL ?= candidate
# The CSV this release upgrades, e.g. modelserver-operator.v0.1.0 (none for the first).
REPLACES ?=
# The versions this release upgrades from in one step.
SKIP_RANGE ?= >=0.0.0 <$(VERSION)
BUNDLE_IMG ?= ghcr.io/modelserver-dev/modelserver-operator-bundle:v$(VERSION)
CATALOG_IMG ?= ghcr.io/modelserver-dev/modelserver-operator-catalog:v$(VERSION)
OLM_ARTIFACTS := bundle bundle.Dockerfile catalog dist/install.yaml dist/monitoring.yaml

.PHONY: bundlegen
bundlegen: ## Build the OLM artifact generator into bin/bundlegen.
	cd hack/olm && go build -o $(LOCALBIN)/bundlegen ./cmd/bundlegen

.PHONY: bundle
bundle: manifests bundlegen $(LOCALBIN)/kustomize ## Generate the OLM bundle (bundle/, bundle.Dockerfile) from config/ and validate it.
	kustomize build config/default | bundlegen bundle --kustomized - --version='$(VERSION)' --channels='$(CHANNELS)' \
		--default-channel='$(DEFAULT_CHANNEL)' --image='$(IMG)' --replaces='$(REPLACES)' --skip-range='$(SKIP_RANGE)'
	bundlegen validate --bundle bundle

.PHONY: catalog
catalog: bundlegen ## Add bundle/ to the file-based catalog (catalog/) as BUNDLE_IMG and validate it.
	bundlegen catalog --bundle-image='$(BUNDLE_IMG)'
	bundlegen validate --catalog catalog

.PHONY: install-yaml dist/install.yaml
dist/install.yaml: install-yaml
install-yaml: manifests bundlegen $(LOCALBIN)/kustomize ## Generate dist/install.yaml, the plain `kubectl apply -f` install, with IMG.
	kustomize build config/default | bundlegen install --kustomized - --image='$(IMG)'

.PHONY: monitoring-yaml dist/monitoring.yaml
dist/monitoring.yaml: monitoring-yaml
monitoring-yaml: $(LOCALBIN)/kustomize ## Generate dist/monitoring.yaml, the operator's ServiceMonitor, alerts and dashboard (docs/alerts.md), from config/prometheus; check that config/prometheus-cert-manager builds.
	kustomize build config/prometheus-cert-manager > /dev/null
	{ echo '# The ModelServer operator: its ServiceMonitor, alerting rules and dashboard (docs/alerts.md), for'; \
	  echo '# clusters with the Prometheus Operator, in the namespace modelserver-system. Install with'; \
	  echo '#   kubectl apply -f dist/monitoring.yaml'; \
	  echo '# Generated by `make monitoring-yaml` from config/prometheus; do not edit.'; \
	  kustomize build config/prometheus; } > dist/monitoring.yaml

.PHONY: verify-olm
verify-olm: ## Fail if bundle/, catalog/, dist/install.yaml or dist/monitoring.yaml differ from what config/ generates.
	@echo ">> $(now) $@"
	$(MAKE) --no-print-directory bundle catalog install-yaml monitoring-yaml
	@changed=$$(git status --porcelain -- $(OLM_ARTIFACTS)); if [ -n "$$changed" ]; then \
		echo "OLM artifacts differ from the commit: run 'make bundle catalog install-yaml monitoring-yaml' and commit:"; echo "$$changed"; \
		git --no-pager diff -- $(OLM_ARTIFACTS); exit 1; fi

.PHONY: test-olm
test-olm: $(LOCALBIN)/kustomize $(LOCALBIN)/operator-sdk ## Test the OLM artifacts: validators (ours and operator-sdk's, run from the root), catalog resolution, drift from config/ (hack/olm).
	@echo ">> $(now) $@"
	cd hack/olm && go vet ./... && go test -count=1 ./...

.PHONY: bundle-build
bundle-build: ## Build the bundle image (needs a container engine).
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: catalog-build
catalog-build: ## Build the file-based catalog image (needs a container engine).
	$(CONTAINER_TOOL) build -f catalog.Dockerfile -t $(CATALOG_IMG) .

##@ Tools
# Every tool is built from source through the Go module proxy at the version
# pinned in hack/tools (some in modules of their own under it), by one
# `go build` of each module into bin/<module>-tools-<hash of its pins>/
# (hack/tools' own: bin/hack-tools-<hash>/), with bin/<tool> linking to
# it. A change of pins builds the new one; otherwise nothing is rebuilt.

comma := ,
space := $(subst ,, )
modver = $(shell awk '$$1 == "require" { $$1 = "" ; $$0 = $$0 } $$1 == "$(2)" && $$2 ~ /^v/ { print $$2; exit }' $(1))
KUBE_VERSION := $(call modver,hack/tools/go.mod,k8s.io/kubernetes)
ETCD_VERSION := $(call modver,hack/tools/go.mod,go.etcd.io/etcd/server/v3)
CONTROLLER_TOOLS_VERSION := $(call modver,hack/tools/go.mod,sigs.k8s.io/controller-tools)
KUSTOMIZE_VERSION := $(call modver,hack/tools/go.mod,sigs.k8s.io/kustomize/kustomize/v5)
KWOK_VERSION := $(call modver,hack/tools/kwok/go.mod,sigs.k8s.io/kwok)
CRD_REF_DOCS_VERSION := $(call modver,hack/tools/crd-ref-docs/go.mod,github.com/elastic/crd-ref-docs)
VERSITYGW_VERSION := $(call modver,hack/tools/versitygw/go.mod,github.com/versity/versitygw)
OPERATOR_SDK_VERSION := $(call modver,hack/tools/operator-sdk/go.mod,github.com/operator-framework/operator-sdk)
GOLANGCI_LINT_VERSION := $(call modver,hack/tools/golangci-lint/go.mod,github.com/golangci/golangci-lint/v2)

# What `kube-apiserver --version` and the /version endpoint report; without
# it a source build says v0.0.0, which breaks kubeVersion checks.
KUBE_SEMVER := $(subst v,,$(KUBE_VERSION))
KUBE_LDFLAGS := $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(KUBE_VERSION) \
	-X $(pkg).gitMajor=$(word 1,$(subst ., ,$(KUBE_SEMVER))) \
	-X $(pkg).gitMinor=$(word 2,$(subst ., ,$(KUBE_SEMVER))) \
	-X $(pkg).gitTreeState=clean)

# The tools are stripped (-s -w), as upstream's release builds are: the
# nine of hack/tools link in half the time (43 s against 22 s warm) and are
# 30 % smaller, and so are the images of OLM's that the OLM suites build,
# push and pull.
TOOL_LDFLAGS := -s -w

# The tools pinned in hack/tools/go.mod are built by one `go build`, so the
# packages they share (client-go, apiserver, ...) compile once: a cold build
# of all nine takes about as long as kubelet and kube-apiserver alone. They
# land in a directory named after the pins and link flags, so a bump
# rebuilds them all.
# They build as this module does (CGO_ENABLED=0 -trimpath), and the modules
# both compile are pinned at the same versions in the two go.mod files
# (verify-shared-deps), so that vet and the tests reuse the 974 packages
# the control plane's build compiled. kubelet is static too, as upstream's
# KUBE_STATIC_OVERRIDES=kubelet builds it: the real node needs none of
# what cgo would add (the host's name service and user lookups).
HACK_TOOLS_PKGS := go.etcd.io/etcd/server/v3 \
	$(foreach c,kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy,k8s.io/kubernetes/cmd/$(c)) \
	sigs.k8s.io/controller-tools/cmd/controller-gen sigs.k8s.io/kustomize/kustomize/v5
HACK_TOOLS_LDFLAGS := $(TOOL_LDFLAGS) $(KUBE_LDFLAGS)
HACK_TOOLS_PIN := $(shell (cat hack/tools/go.mod hack/tools/go.sum; echo '$(HACK_TOOLS_LDFLAGS)') | sha256sum | cut -c1-12)
HACK_TOOLS_DIR := $(LOCALBIN)/hack-tools-$(HACK_TOOLS_PIN)
$(HACK_TOOLS_DIR)/.built:
	@mkdir -p $(LOCALBIN)
	@echo ">> $(now) building etcd $(ETCD_VERSION), Kubernetes $(KUBE_VERSION) (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, kube-proxy), controller-gen $(CONTROLLER_TOOLS_VERSION), kustomize $(KUSTOMIZE_VERSION)"
	rm -rf $(HACK_TOOLS_DIR).tmp
	cd hack/tools && go build -ldflags '$(HACK_TOOLS_LDFLAGS)' -o $(HACK_TOOLS_DIR).tmp/ $(HACK_TOOLS_PKGS)
	mv $(HACK_TOOLS_DIR).tmp/server $(HACK_TOOLS_DIR).tmp/etcd
	touch $(HACK_TOOLS_DIR).tmp/.built
	rm -rf $(HACK_TOOLS_DIR) && mv $(HACK_TOOLS_DIR).tmp $(HACK_TOOLS_DIR)
define hack-tool-rule
$(LOCALBIN)/$(1): $(HACK_TOOLS_DIR)/.built
	ln -sfn $(notdir $(HACK_TOOLS_DIR))/$(1) $$@
TOOLS += $(LOCALBIN)/$(1)
endef
$(foreach t,etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy controller-gen kustomize,$(eval $(call hack-tool-rule,$(t))))

# module-tools-rule VAR,MODULE_DIR,WHAT,PACKAGES,LINKS: every package of one
# module in one `go build`, so that what they share compiles once, into a
# directory named after the module's pins and the link flags; LINKS are
# bin/<link>:<binary>.
# OLM's and operator-controller's image libraries need the pure-Go OpenPGP
# tag without cgo, as their own builds use.
define module-tools-rule
$(1)_DIR := $(LOCALBIN)/$(notdir $(2))-tools-$$(shell (cat $(2)/go.mod $(2)/go.sum; echo '$(TOOL_LDFLAGS)') | sha256sum | cut -c1-12)
$$($(1)_DIR)/.built:
	@mkdir -p $(LOCALBIN)
	@echo ">> $$(now) building $(3)"
	rm -rf $$(@D).tmp
	cd $(2) && CGO_ENABLED=0 go build -trimpath -ldflags '$(TOOL_LDFLAGS)' -tags containers_image_openpgp -o $$(@D).tmp/ $(4)
	touch $$(@D).tmp/.built
	rm -rf $$(@D) && mv $$(@D).tmp $$(@D)
$$(foreach l,$(5),$$(eval $$(call module-tool-link,$(1),$$(word 1,$$(subst :, ,$$(l))),$$(word 2,$$(subst :, ,$$(l))))))
endef
define module-tool-link
$(LOCALBIN)/$(2): $$($(1)_DIR)/.built
	ln -sfn $$(notdir $$($(1)_DIR))/$(3) $$@
TOOLS += $(LOCALBIN)/$(2)
endef

OLM_VERSION := $(call modver,hack/tools/olm/go.mod,github.com/operator-framework/operator-lifecycle-manager)
OPM_VERSION := $(call modver,hack/tools/olm/go.mod,github.com/operator-framework/operator-registry)
GRPC_HEALTH_PROBE_VERSION := $(call modver,hack/tools/olm/go.mod,github.com/grpc-ecosystem/grpc-health-probe)
OPERATOR_CONTROLLER_VERSION := $(call modver,hack/tools/olmv1/go.mod,github.com/operator-framework/operator-controller)
OLM := github.com/operator-framework/operator-lifecycle-manager
OLM_TOOLS_PKGS := $(OLM)/cmd/olm $(OLM)/cmd/catalog $(OLM)/cmd/package-server $(OLM)/util/cpb \
	github.com/operator-framework/operator-registry/cmd/opm github.com/grpc-ecosystem/grpc-health-probe
$(eval $(call module-tools-rule,OLM_TOOLS,hack/tools/olm,OLM $(OLM_VERSION) (olm-operator$(comma) catalog-operator$(comma) packageserver$(comma) cpb)$(comma) opm $(OPM_VERSION)$(comma) grpc_health_probe $(GRPC_HEALTH_PROBE_VERSION),\
	$(OLM_TOOLS_PKGS),\
	olm-operator:olm catalog-operator:catalog packageserver:package-server cpb:cpb opm:opm grpc_health_probe:grpc-health-probe))
$(eval $(call module-tools-rule,OLMV1_TOOLS,hack/tools/olmv1,operator-controller and catalogd $(OPERATOR_CONTROLLER_VERSION),\
	github.com/operator-framework/operator-controller/cmd/operator-controller github.com/operator-framework/operator-controller/cmd/catalogd,\
	operator-controller:operator-controller catalogd:catalogd))

$(eval $(call module-tools-rule,CRD_REF_DOCS_TOOLS,hack/tools/crd-ref-docs,crd-ref-docs $(CRD_REF_DOCS_VERSION),github.com/elastic/crd-ref-docs,crd-ref-docs:crd-ref-docs))
VERSITYGW_PKG := github.com/versity/versitygw/cmd/versitygw
$(eval $(call module-tools-rule,VERSITYGW_TOOLS,hack/tools/versitygw,versitygw $(VERSITYGW_VERSION),$(VERSITYGW_PKG),versitygw:versitygw))

# kwok, in a directory named after its module's pins: they follow the
# operator's module (verify-shared-deps) and move without kwok's version.
KWOK_PKG := sigs.k8s.io/kwok/cmd/kwok
$(eval $(call module-tools-rule,KWOK_TOOLS,hack/tools/kwok,kwok $(KWOK_VERSION),$(KWOK_PKG),kwok:kwok))

# operator-sdk in a module of its own, with scorecard-test, the binary of the
# image `operator-sdk scorecard` runs its basic and olm tests in (test/olm
# builds that image from it): one `go build`, so they share what they compile.
OPERATOR_SDK_PKGS := github.com/operator-framework/operator-sdk/cmd/operator-sdk github.com/operator-framework/operator-sdk/images/scorecard-test
$(eval $(call module-tools-rule,OPERATOR_SDK_TOOLS,hack/tools/operator-sdk,operator-sdk $(OPERATOR_SDK_VERSION) and its scorecard-test,\
	$(OPERATOR_SDK_PKGS),\
	operator-sdk:operator-sdk scorecard-test:scorecard-test))

# golangci-lint in a module of its own, so that its linters' dependencies
# stay out of go.mod; `make lint` runs it. A cold build takes about 1.5
# minutes on two cores.
$(eval $(call module-tools-rule,GOLANGCI_LINT_TOOLS,hack/tools/golangci-lint,golangci-lint $(GOLANGCI_LINT_VERSION),\
	github.com/golangci/golangci-lint/v2/cmd/golangci-lint,golangci-lint:golangci-lint))

# The real node's sandbox ("pause") process, packed into an image the
# local cluster serves; the project's own, since nothing can be pulled.
$(LOCALBIN)/pause: internal/localcluster/pause/main.go
	@mkdir -p $(LOCALBIN)
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o $@ ./internal/localcluster/pause
TOOLS += $(LOCALBIN)/pause

# The modules the tools and this module's vet build from. On a cold machine
# they take about 2.5 minutes to download, mostly waiting on the network,
# and each `go build` would wait for its own before compiling; so while the
# control plane's build compiles (the first, 9 to 15 minutes on two cores), the
# others download beside it. A download that fails here fails again, with
# its message, in the build that needs it.
TOOL_MODULES := hack/tools hack/tools/olm hack/tools/olmv1 hack/tools/crd-ref-docs hack/tools/versitygw \
	hack/tools/kwok hack/tools/operator-sdk hack/tools/golangci-lint .

.PHONY: tools
tools: ## Build the pinned tools and control-plane binaries into bin/.
	@$(MAKE) --no-print-directory -q tools-build && exit 0; \
	for m in $(TOOL_MODULES); do (cd $$m && go mod download); done & download=$$!; \
	$(MAKE) --no-print-directory tools-build && rc=0 || rc=$$?; \
	wait $$download || true; exit $$rc
.PHONY: tools-build
tools-build: $(TOOLS)

# The real node runs Debian's containerd, runc and CNI plugins; iptables
# and iproute2 for kube-proxy and the bridge. qemu-user runs the image's
# arm64 binaries in cmd/image's test (its emulators only: without the
# recommended qemu-user-binfmt, nothing registers with the kernel).
# Installed only when missing and only as root (a machine that cannot be
# root cannot run containers, and the real-node suites say so and skip).
NODE_DEPS := containerd runc containernetworking-plugins iptables iproute2 ca-certificates busybox-static qemu-user

.PHONY: node-deps
node-deps: ## Install the real node's Debian packages (containerd, runc, CNI plugins, iptables) and qemu-user when missing; needs root.
	@missing=$$(for p in $(NODE_DEPS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "node-deps: not root or no apt-get; the real node needs: $$missing"; exit 0; fi; \
	echo ">> installing $$missing"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null

.PHONY: print-versions
print-versions: ## Print the pinned tool versions.
	@echo "kubernetes $(KUBE_VERSION)"; echo "etcd $(ETCD_VERSION)"; echo "kwok $(KWOK_VERSION)"
	@echo "controller-tools $(CONTROLLER_TOOLS_VERSION)"; echo "kustomize $(KUSTOMIZE_VERSION)"
	@echo "crd-ref-docs $(CRD_REF_DOCS_VERSION)"; echo "versitygw $(VERSITYGW_VERSION)"; echo "operator-sdk $(OPERATOR_SDK_VERSION)"
	@echo "OLM $(OLM_VERSION)"; echo "opm $(OPM_VERSION)"; echo "grpc_health_probe $(GRPC_HEALTH_PROBE_VERSION)"; echo "operator-controller $(OPERATOR_CONTROLLER_VERSION)"
	@echo "golangci-lint $(GOLANGCI_LINT_VERSION)"
