# TAS — developer entry points. `make test` is what CI runs.
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build lint fmt crds cluster-tools test unit-test clean-cluster-tools help

all: build

help: ## List the targets
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

cluster-tools: ## Build etcd, kube-apiserver, controller-manager, kube-scheduler, kubectl, kwok (cached)
	@e2e/tools/build.sh >/dev/null

# The test control plane's binaries: built once, cached outside the work tree by version.
TOOLS_BIN = $(shell e2e/tools/build.sh | tail -n 1)

test: lint ## Lint, then every test of the workspace (unit + real-cluster integration)
	@bin="$(TOOLS_BIN)"; test -n "$$bin" || { echo "make test: building the cluster tools failed" >&2; exit 1; }; \
	TAS_TOOLS_BIN="$$bin" $(CARGO) test --workspace

unit-test: ## Only the tests that need no control plane
	$(CARGO) test --workspace --lib --bins
