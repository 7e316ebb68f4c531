# The front door. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO ?= cargo
TESTBED := e2e/testbed
# The testbed's run directory: RUN_DIR=<dir> or TESTBED_RUN_DIR=<dir> (as the scripts take it).
RUN_DIR ?= $(or $(TESTBED_RUN_DIR),$(CURDIR)/target/testbed)
export TESTBED_RUN_DIR := $(RUN_DIR)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## build every crate (debug)
	$(CARGO) build --workspace --all-targets

.PHONY: release
release: ## build both operators' release binaries as the Containerfiles do (--locked), into target/release
	$(CARGO) build --release --locked -p cluster-operator -p resources-operator

# Static glibc (no musl target on the project's toolchain): the binaries need no libc in the
# image, so the images are scratch plus one file. An explicit --target keeps RUSTFLAGS away from
# build scripts and proc-macros.
STATIC_TARGET := x86_64-unknown-linux-gnu
.PHONY: release-static
release-static: ## build both operators as static binaries, as their Containerfiles do, into target/$(STATIC_TARGET)/release
	RUSTFLAGS='-C target-feature=+crt-static' $(CARGO) build --release --locked --target $(STATIC_TARGET) \
	  -p cluster-operator -p resources-operator

.PHONY: images
images: testbed-up ## build the operator, server and OLM bundle and catalog images here (no Docker) and push them to the testbed's registry
	$(TESTBED)/push-images.sh all

.PHONY: crds
# The CRDs come from the operator binary (`cluster-operator crd`), everything else from the
# generators of the tools crate (`xtask`, tools/).
XTASK := $(CARGO) run -q -p tools --bin xtask --
crds: ## regenerate the CRD, admission-policy, RBAC-rules and operator-pod YAML for the Helm chart, the OLM bundle (CRDs, CSV, metadata) and catalog, and docs/crd-reference.md
	mkdir -p helm/infinispan-operator/crds helm/infinispan-operator/files olm/bundle/manifests
	$(CARGO) run -q -p cluster-operator -- crd > helm/infinispan-operator/crds/infinispan.org.yaml
	$(CARGO) run -q -p cluster-operator -- crd --split olm/bundle/manifests
	$(XTASK) admission-policy > helm/infinispan-operator/files/label-policy.yaml
	$(XTASK) resources-operator-rules > helm/infinispan-operator/files/resources-operator-rules.yaml
	$(XTASK) cluster-operator-rules > helm/infinispan-operator/files/cluster-operator-rules.yaml
	$(XTASK) operator-pod > helm/infinispan-operator/files/operator-pod.yaml
	$(XTASK) olm --dir olm
	$(XTASK) crd-reference > docs/crd-reference.md

.PHONY: bundle-validate
bundle-validate: ## validate the OLM bundle (operator-sdk, operatorframework suite: no error, no warning) and the catalog (opm); tools from testbed-build
	@source $(TESTBED)/lib.sh && sdk=$$(operator_sdk_bin) && opm=$$(opm_bin) \
	  || { echo "operator-sdk or opm missing: run make testbed-build" >&2; exit 1; }; \
	out=$$("$$sdk" bundle validate ./olm/bundle --select-optional suite=operatorframework 2>&1); rc=$$?; \
	echo "$$out"; \
	if ((rc != 0)) || grep -qE 'level=(warning|error|fatal)' <<<"$$out"; then \
	  echo "operator-sdk bundle validate: errors or warnings above" >&2; exit 1; fi; \
	"$$opm" validate olm/catalog && echo "opm validate olm/catalog: ok"

.PHONY: lint-containerfiles
lint-containerfiles: ## lint the Containerfiles with hadolint (built by testbed-build)
	@source $(TESTBED)/lib.sh && hadolint=$$(hadolint_bin) \
	  || { echo "hadolint missing: run make testbed-build" >&2; exit 1; }; \
	"$$hadolint" cluster-operator/Containerfile resources-operator/Containerfile olm/bundle.Containerfile olm/catalog.Containerfile \
	  && echo "hadolint: the four Containerfiles are clean"

.PHONY: testbed-build
testbed-build: ## build (once, cached in ~/.cache/infinispan-operators) Kubernetes, etcd, Infinispan, helm, operator-sdk, opm, grpc_health_probe, hadolint, the node (containerd, CNI, CoreDNS, registry, crane, local-path-provisioner, kube-router) and OLM
	$(TESTBED)/build.sh all

.PHONY: testbed-up
testbed-up: ## start etcd, kube-apiserver, kube-controller-manager, the node (TESTBED_NODE=0: without), OLM on it (TESTBED_OLM=0: without), Infinispan; writes target/testbed/env
	$(TESTBED)/host-packages.sh
	$(TESTBED)/up.sh

.PHONY: testbed-down
testbed-down: ## stop exactly the testbed processes started by testbed-up
	$(TESTBED)/down.sh

.PHONY: testbed-wipe
testbed-wipe: ## stop the testbed and delete its state (target/testbed)
	$(TESTBED)/down.sh --wipe

BENCH_PROFILE ?= standard
BENCH_ARGS ?=
.PHONY: bench
bench: testbed-up ## the resources operator's benchmark, each figure beside its floor (N=100, 1000; BENCH_PROFILE=large adds 5000 and 10000; BENCH_ARGS="--steady-seconds 10"); docs/benchmark.md, docs/benchmark.svg
	$(CARGO) build --release -p resources-operator
	$(CARGO) build --release -p bench
	source $(RUN_DIR)/env && "$${CARGO_TARGET_DIR:-target}/release/bench" --profile $(BENCH_PROFILE) \
	  --operator-binary "$${CARGO_TARGET_DIR:-target}/release/resources-operator" \
	  --command 'make bench BENCH_PROFILE=$(BENCH_PROFILE)$(if $(BENCH_ARGS), BENCH_ARGS="$(BENCH_ARGS)")' $(BENCH_ARGS)
	$(MAKE) bench-shared

.PHONY: bench-shared
bench-shared: testbed-up ## the shared resources operator's phase of make bench: 20 clusters x 250 caches, 20 per-cluster operators vs one shared (BENCH_SHARED_ARGS="--clusters 5 --steady-seconds 10"); docs/benchmark.md
	$(CARGO) build --release -p resources-operator
	$(CARGO) build --release -p bench
	source $(RUN_DIR)/env && "$${CARGO_TARGET_DIR:-target}/release/bench" shared \
	  --operator-binary "$${CARGO_TARGET_DIR:-target}/release/resources-operator" \
	  --command 'make bench-shared$(if $(BENCH_SHARED_ARGS), BENCH_SHARED_ARGS="$(BENCH_SHARED_ARGS)")' $(BENCH_SHARED_ARGS)

.PHONY: lint
lint: ## rustfmt, clippy and rustdoc, warnings are errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps -q

.PHONY: test
test: lint testbed-up images ## everything: lint, unit tests, integration tests on the real testbed and its node
	source $(RUN_DIR)/env && source $(RUN_DIR)/images.env && $(CARGO) test --workspace --no-fail-fast

.PHONY: chaos
chaos: testbed-up ## the chaos suite, full profile (500 ops, faults; 3 seeds or CHAOS_SEED=n; CHAOS_PROFILE=short; CHAOS_MODE=ToServer|FromServer; CHAOS_WINNER=Server); restarts the testbed's kube-apiserver, see docs/chaos.md
	@echo "WARNING: make chaos (full profile) kills and restarts the kube-apiserver of the testbed in $(RUN_DIR):" \
	  "nothing else may use that testbed meanwhile. A private one on other ports: docs/chaos.md, \"Running it\"." >&2
	source $(RUN_DIR)/env && CHAOS_SEED="$(CHAOS_SEED)" CHAOS_WINNER="$(CHAOS_WINNER)" \
	  CHAOS_MODE="$(CHAOS_MODE)" CHAOS_PROFILE="$(CHAOS_PROFILE)" $(CARGO) run -p e2e --bin chaos

.PHONY: demo
demo: testbed-up images ## the operators at work, as pods: Helm chart, a 2-server cluster, sync both ways (left running)
	e2e/demo.sh

.PHONY: demo-down
demo-down: ## remove what `make demo` made (the testbed keeps running)
	e2e/demo.sh down

.PHONY: demo-olm
demo-olm: testbed-up images ## the operator installed through OLM on the node: CatalogSource, Subscription, CSV, a cluster (left running)
	e2e/demo-olm.sh

.PHONY: demo-olm-down
demo-olm-down: ## remove what `make demo-olm` made (the testbed and OLM keep running)
	e2e/demo-olm.sh down
