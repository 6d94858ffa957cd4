# TAS — developer entry points. `make test` is what CI runs.
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build lint fmt crds chart cluster-tools test real-node-test unit-test clean-cluster-tools help images image-archives demo bench fuzz plugin-dist

all: build

help: ## List the targets (variables they take in parentheses)
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## Build every crate of the workspace
	$(CARGO) build --workspace --all-targets

lint: ## rustfmt check + clippy with warnings denied
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt: ## Format the code
	$(CARGO) fmt --all

crds: ## Regenerate config/crd/ from the Rust types in api/
	$(CARGO) run --quiet -p tas-operator -- crd --out config/crd

chart: ## Regenerate charts/tas/ from config/default and config/prometheus (kubectl kustomize; a test checks it is current)
	@bin=$$(TAS_TOOLS_ONLY=k8s testcluster/tools/build.sh | tail -n 1); \
	test -n "$$bin" || { echo "make chart: building kubectl failed" >&2; exit 1; }; \
	$(CARGO) run --quiet -p tas-e2e --bin tas-chart -- --kubectl "$$bin/kubectl"

cluster-tools: ## Build etcd, kube-apiserver, controller-manager, kube-scheduler, kubectl, kwok, helm, promtool, prometheus (cached)
	@testcluster/tools/build.sh >/dev/null

clean-cluster-tools: ## Remove the cached binaries of the pinned versions (TAS_TOOLS_CACHE); the next run rebuilds them
	@testcluster/tools/build.sh --clean

# The test control plane's binaries: built once, cached outside the work tree by version.
TOOLS_BIN = $(shell testcluster/tools/build.sh | tail -n 1)
# make test's: the same plus the kubelet, kube-proxy, device plugin, DRA driver and
# CDI-capable containerd of the real-node tests (one directory of symlinks holds both
# sets) and the oldest supported control
# plane, which the full-stack test also runs against (TEST_TOOLS_OLDEST_BIN).
TEST_TOOLS = k8s k8s-oldest etcd kwok helm promtool prometheus kubelet
TEST_TOOLS_BIN = $(shell TAS_TOOLS_ONLY="$(TEST_TOOLS)" testcluster/tools/build.sh | tail -n 1)
TEST_TOOLS_OLDEST_BIN = $(shell TAS_TOOLS_ONLY="$(TEST_TOOLS)" testcluster/tools/build.sh --oldest | tail -n 1)
# The referee: the kubelet's admission code and podresources server (nodesim/referee), cached
# the same way; tests, the demo and the benchmark find it through TAS_REFEREE_BIN (the
# oldest supported kubelet minor's). REFEREE_BINS: one per supported minor
# (`v1.34.4=PATH,v1.35.4=PATH,...`), which the differential test judges against in turn
# (TAS_REFEREE_BINS); empty when one of them failed to build.
REFEREE_BIN = $(shell nodesim/referee/build.sh | tail -n 1)
REFEREE_BINS = $(shell out=$$(nodesim/referee/build.sh --all) && echo "$$out" | paste -sd, -)
# The DRA referee: kube-scheduler's structured-parameters allocator (nodesim/dra-referee),
# cached the same way; the tests of TAS's DRA allocation judge against it through
# TAS_DRA_REFEREE_BIN.
DRA_REFEREE_BIN = $(shell nodesim/dra-referee/build.sh | tail -n 1)

# The OpenTelemetry Collector the OTLP test exports to (OTLP receiver + file exporter,
# built from Go modules by testcluster/tools/build-otelcol.sh, cached the same way).
OTELCOL_BIN = $(shell testcluster/tools/build-otelcol.sh | tail -n 1)

# The kubelet Topology Manager's own merge test tables as JSON, one file per supported
# kubelet minor (go test -overlay on k8s.io/kubernetes; cached by version like the
# tools), replayed by the scheduler's tests: `v1.34.4=PATH,...`, empty when a dump failed.
KUBELET_TABLES = $(shell out=$$(scheduler/tests/kubelet_tables/dump.sh --all) && echo "$$out" | paste -sd, -)

# The Go program that writes the image archives (images/imagebuild), cached the same way;
# e2e/tests/images.rs builds archives with it through TAS_IMAGEBUILD_BIN.
IMAGEBUILD_BIN = $(shell images/build.sh --tool | tail -n 1)

test: lint ## Lint, then every test of the workspace (unit + real-cluster integration + real-node, root)
	@bin="$(TEST_TOOLS_BIN)"; test -n "$$bin" || { echo "make test: building the cluster tools failed" >&2; exit 1; }; \
	oldest="$(TEST_TOOLS_OLDEST_BIN)"; test -n "$$oldest" || { echo "make test: building the oldest control plane failed" >&2; exit 1; }; \
	tables="$(KUBELET_TABLES)"; test -n "$$tables" || { echo "make test: dumping the kubelet's policy tables failed (see above; Go is needed)" >&2; exit 1; }; \
	referee="$(REFEREE_BIN)"; test -n "$$referee" || { echo "make test: building the referee failed" >&2; exit 1; }; \
	referees="$(REFEREE_BINS)"; test -n "$$referees" || { echo "make test: building the referees of every kubelet minor failed" >&2; exit 1; }; \
	dra_referee="$(DRA_REFEREE_BIN)"; test -n "$$dra_referee" || { echo "make test: building the DRA referee failed" >&2; exit 1; }; \
	otelcol="$(OTELCOL_BIN)"; test -n "$$otelcol" || { echo "make test: building the OpenTelemetry Collector failed" >&2; exit 1; }; \
	imagebuild="$(IMAGEBUILD_BIN)"; test -n "$$imagebuild" || { echo "make test: building imagebuild (images/) failed" >&2; exit 1; }; \
	testcluster/tools/install-node-runtime.sh >/dev/null || \
		echo "make test: the node runtime is missing and could not be installed (above); the real-node tests will say so and skip" >&2; \
	pause=$$(TAS_IMAGEBUILD_BIN="$$imagebuild" testcluster/tools/build-pause.sh | tail -n 1) || \
		echo "make test: building the pause image failed (above); the real-node tests will say so and skip" >&2; \
	$(CARGO) build -p tas-operator -p tas-scheduler -p tas-updater && \
	TAS_TOOLS_BIN="$$bin" TAS_TOOLS_BIN_OLDEST="$$oldest" TAS_KUBELET_TABLES="$$tables" TAS_REFEREE_BIN="$$referee" TAS_REFEREE_BINS="$$referees" \
		TAS_DRA_REFEREE_BIN="$$dra_referee" TAS_OTELCOL_BIN="$$otelcol" TAS_IMAGEBUILD_BIN="$$imagebuild" TAS_PAUSE_IMAGE="$$pause" $(CARGO) test --workspace

# DEMO_ARGS go to tas-demo, e.g. DEMO_ARGS=--no-wait (exit after the report) or
# DEMO_ARGS="--scenario my-scenario.yaml"; all of them: DEMO_ARGS=--help.
# REAL_NODE=1 adds a real kubelet node (root; installs the node runtime, builds the
# kubelet and the sandbox image) and prints its own verdicts beside the simulated ones.
demo: ## The whole stack on a local control plane with simulated NUMA nodes; prints a report (DEMO_ARGS, REAL_NODE=1)
	@if [ -n "$(REAL_NODE)" ]; then \
		testcluster/tools/install-node-runtime.sh >/dev/null || exit 1; \
		bin=$$(TAS_TOOLS_ONLY="k8s etcd kwok helm promtool kubelet" testcluster/tools/build.sh | tail -n 1); \
		pause=$$(testcluster/tools/build-pause.sh | tail -n 1); \
		test -n "$$pause" || { echo "make demo: building the pause image failed" >&2; exit 1; }; \
		args="--real-node"; \
	else bin="$(TOOLS_BIN)"; pause=; args=; fi; \
	test -n "$$bin" || { echo "make demo: building the cluster tools failed" >&2; exit 1; }; \
	referee="$(REFEREE_BIN)"; test -n "$$referee" || { echo "make demo: building the referee failed" >&2; exit 1; }; \
	$(CARGO) build --quiet -p tas-operator -p tas-scheduler -p tas-updater && \
	TAS_TOOLS_BIN="$$bin" TAS_REFEREE_BIN="$$referee" TAS_PAUSE_IMAGE="$$pause" \
		$(CARGO) run --quiet -p tas-e2e --bin tas-demo -- $$args $(DEMO_ARGS)

# Benchmarks: the criterion micro-benchmarks, then the cluster benchmark (tas-bench: TAS
# vs kube-scheduler, the scheduler-plugins NUMA plugin and a bind-only ceiling on local
# control planes, scenarios backlog, paced, updater, saturation, scale and dra (DRA
# devices beside kubelet-managed CPUs: TAS and kube-scheduler only), 5 runs each;
# about 2.5 hours on 2 cores with the defaults, most of it the NUMA plugin draining
# 5,000 pods at 15-35/s; bench/README.md says where the time goes). BENCH_ARGS go to
# tas-bench, e.g.
# BENCH_ARGS="--quick" or "--scenario backlog --runs 5".
# The criterion settings of every micro-benchmark (one place for all three crates).
CRITERION_ARGS ?= --sample-size 20 --warm-up-time 1 --measurement-time 3

bench: ## Criterion benches + tas-bench; writes BENCHMARKS.md (BENCH_ARGS)
	@bin=$$(TAS_TOOLS_ONLY="k8s etcd kwok schedplugins" testcluster/tools/build.sh | tail -n 1); \
	test -n "$$bin" || { echo "make bench: building the cluster tools failed" >&2; exit 1; }; \
	referee="$(REFEREE_BIN)"; test -n "$$referee" || { echo "make bench: building the referee failed" >&2; exit 1; }; \
	referees="$(REFEREE_BINS)"; test -n "$$referees" || { echo "make bench: building the referees of every kubelet minor failed" >&2; exit 1; }; \
	dra_referee="$(DRA_REFEREE_BIN)"; test -n "$$dra_referee" || { echo "make bench: building the DRA referee failed" >&2; exit 1; }; \
	export TAS_REFEREE_BIN="$$referee" TAS_REFEREE_BINS="$$referees" TAS_DRA_REFEREE_BIN="$$dra_referee"; \
	target="$${CARGO_TARGET_DIR:-target}"; \
	$(CARGO) build --release -p tas-scheduler -p tas-bench && \
	$(CARGO) build --profile node-agent -p tas-updater && \
	{ $(CARGO) test --release -p tas-e2e --test differential -- --ignored --nocapture || \
		echo "make bench: the large differential run found false-admits (table above)"; } && \
	$(CARGO) bench -p tas-api -p tas-scheduler -p tas-updater --bench '*' -- $(CRITERION_ARGS) && \
	TAS_TOOLS_BIN="$$bin" "$$target/release/tas-bench" --tas-updater "$$target/node-agent/tas-updater" $(BENCH_ARGS) \
		--criterion "$$target/criterion" --out BENCHMARKS.md

# A real kubelet and containerd on this machine (testcluster's real_node module): needs
# root; installs containerd, runc and the CNI plugins when missing (Debian packages),
# builds the kubelet and kube-proxy (TAS_TOOLS_ONLY=kubelet, cached like the others; a
# few minutes cold; with them the tests' device plugin and DRA driver, and containerd 2,
# whose CDI support the DRA test's node needs) and the pause image. `make test` runs the same test, which says it
# is skipped when one of these is missing.
real-node-test: ## Only the real-node tests (make test runs them too; root)
	@testcluster/tools/install-node-runtime.sh >/dev/null && \
	bin=$$(TAS_TOOLS_ONLY="k8s etcd kwok helm kubelet" testcluster/tools/build.sh | tail -n 1); \
	test -n "$$bin" || { echo "make real-node-test: building the cluster tools failed" >&2; exit 1; }; \
	pause=$$(testcluster/tools/build-pause.sh | tail -n 1); \
	test -n "$$pause" || { echo "make real-node-test: building the pause image failed" >&2; exit 1; }; \
	TAS_TOOLS_BIN="$$bin" TAS_PAUSE_IMAGE="$$pause" $(CARGO) test -p tas-testcluster --test real_node -- --nocapture && \
	TAS_TOOLS_BIN="$$bin" TAS_PAUSE_IMAGE="$$pause" $(CARGO) test -p tas-e2e --test real_node_podresources -- --nocapture && \
	$(CARGO) build -p tas-operator -p tas-scheduler -p tas-updater && \
	TAS_TOOLS_BIN="$$bin" TAS_PAUSE_IMAGE="$$pause" $(CARGO) test -p tas-e2e --test real_node_stack -- --nocapture && \
	TAS_TOOLS_BIN="$$bin" TAS_PAUSE_IMAGE="$$pause" $(CARGO) test -p tas-e2e --test real_node_faults -- --nocapture && \
	TAS_TOOLS_BIN="$$bin" TAS_PAUSE_IMAGE="$$pause" $(CARGO) test -p tas-e2e --test real_node_dra -- --nocapture

unit-test: ## Only the tests that need no control plane
	$(CARGO) test --workspace --lib --bins

# Fuzzing (docs/fuzzing.md): nightly and cargo-fuzz, never part of `make test` (the
# committed corpus is replayed on stable by e2e/tests/fuzz_corpus.rs). Each target runs
# for FUZZ_TIME seconds in one process, one after another; an input slower than
# FUZZ_TIMEOUT seconds is a finding like a crash. New inputs go to
# fuzz/target/corpus/<target>; the committed fuzz/corpus/<target> is only read (merge
# new inputs with `cargo fuzz cmin` before committing); crashes land in fuzz/artifacts/.
FUZZ_TIME ?= 60
FUZZ_TIMEOUT ?= 10
FUZZ_TARGETS ?= $(basename $(notdir $(wildcard fuzz/fuzz_targets/*.rs)))

fuzz: ## Run every cargo-fuzz target for a bounded time on nightly (FUZZ_TIME seconds each, FUZZ_TARGETS)
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	@for t in $(FUZZ_TARGETS); do \
		echo "make fuzz: $$t for $(FUZZ_TIME)s"; \
		mkdir -p "$(CURDIR)/fuzz/target/corpus/$$t" || exit 1; \
		$(CARGO) +nightly fuzz run $$t "$(CURDIR)/fuzz/target/corpus/$$t" "$(CURDIR)/fuzz/corpus/$$t" -- \
			-max_total_time=$(FUZZ_TIME) -timeout=$(FUZZ_TIMEOUT) -print_final_stats=1 || \
			{ echo "make fuzz: $$t failed (input in fuzz/artifacts/$$t/)" >&2; exit 1; }; \
	done

# kubectl-tas for krew: the release build of this machine's platform packed as
# kubectl-tas_<version>_<os>_<arch>.tar.gz (binary, LICENSE, README), its .sha256 and
# the krew Plugin manifest tas.yaml rendered from kubectl-tas/krew/tas.yaml with the
# release URI under Cargo.toml's repository. Other platforms: run it there, or
# kubectl-tas/krew/dist.sh --binary <cross-built> --os <os> --arch <arch>.
PLUGIN_DIST_DIR ?= $(or $(CARGO_TARGET_DIR),target)/plugin-dist

plugin-dist: ## kubectl-tas release archive for this platform, its sha256 and the krew manifest (PLUGIN_DIST_DIR)
	CARGO="$(CARGO)" kubectl-tas/krew/dist.sh --out "$(PLUGIN_DIST_DIR)"

# Container images, two ways. `make images`: the Dockerfile, with a docker-compatible CLI
# (BuildKit). `make image-archives`: no container engine; images/build.sh assembles the
# same images from the cargo-built binaries and Debian packages (apt-get download) into
# docker-archive files for `docker load`, `podman load`, `ctr images import`,
# `kind load image-archive`, `crane push` or `skopeo copy docker-archive:`. The .debs and
# the Go program writing the archives (images/imagebuild) are cached under
# ~/.cache/tas. VERSION defaults to the workspace version, which config/manager's image
# tags match.
IMAGE_REPO ?= ghcr.io/tas-dev
VERSION ?= v$(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
CONTAINER_TOOL ?= docker
IMAGE_REVISION = $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# Where the archives go, the cargo profile of the binaries in them (release, or debug for
# a quick try), and an OCI image layout to add them to as well (empty: none).
IMAGE_ARCHIVE_DIR ?= $(or $(CARGO_TARGET_DIR),target)/images
IMAGE_PROFILE ?= release
IMAGE_OCI_LAYOUT ?=

images: ## Build the tas-operator, tas-scheduler and tas-updater images with a container engine (IMAGE_REPO, VERSION, CONTAINER_TOOL)
	@for c in operator scheduler updater; do \
		echo "building $(IMAGE_REPO)/tas-$$c:$(VERSION)"; \
		$(CONTAINER_TOOL) build --target $$c --build-arg VERSION=$(VERSION) \
			--build-arg REVISION=$(IMAGE_REVISION) \
			-t $(IMAGE_REPO)/tas-$$c:$(VERSION) . || exit 1; \
	done

# With IMAGE_PROFILE=release the node agent is built with the size-optimised
# `node-agent` profile (Cargo.toml), as the Dockerfile builds it.
image-archives: ## Build the three images as image archives, no container engine needed (IMAGE_ARCHIVE_DIR, IMAGE_PROFILE, IMAGE_REPO, VERSION, IMAGE_OCI_LAYOUT)
	$(CARGO) build --profile $(if $(filter debug,$(IMAGE_PROFILE)),dev,$(IMAGE_PROFILE)) \
		-p tas-operator -p tas-scheduler -p tas-updater
	$(if $(filter release,$(IMAGE_PROFILE)),$(CARGO) build --profile node-agent -p tas-updater)
	@images/build.sh --bin-dir "$(or $(CARGO_TARGET_DIR),target)/$(IMAGE_PROFILE)" \
		$(if $(filter release,$(IMAGE_PROFILE)),--updater-bin "$(or $(CARGO_TARGET_DIR),target)/node-agent/tas-updater") \
		--out "$(IMAGE_ARCHIVE_DIR)" --repo "$(IMAGE_REPO)" --version "$(VERSION)" \
		$(if $(IMAGE_OCI_LAYOUT),--oci-layout "$(IMAGE_OCI_LAYOUT)") >/dev/null
