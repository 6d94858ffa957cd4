# syntax=docker/dockerfile:1
#
# TAS container images: one stage compiles the three binaries, then one small image per
# binary, selected with --target:
#
#   docker build --target operator  -t <repo>/tas-operator:<tag> .
#   docker build --target scheduler -t <repo>/tas-scheduler:<tag> .
#   docker build --target updater   -t <repo>/tas-updater:<tag> .
#
# `make images` runs all three; the compile stage is shared, so the second and third
# builds come from its cache.
#
# Runtime base: distroless `cc` (glibc, libgcc, CA certificates, tzdata and a `nonroot`
# user 65532; no shell, no package manager). Chosen over static musl binaries on
# `scratch`: the binaries are built for glibc on the same Debian release (no cross
# toolchain), musl's allocator is slow for the scheduler's many small allocations, and
# the CA bundle is needed for https OTLP endpoints.
#
# Every image runs as 65532. The node agent's DaemonSet overrides that with uid 0 (the
# kubelet's pod-resources socket is root-only); the operator's Deployment and the
# scheduler's run as 65532 with a read-only root filesystem.

# The toolchain the tree is tested with (Cargo.toml's rust-version is the minimum). The
# build image's Debian release (bookworm) must match the runtime's (debian12), so that
# the binaries find the glibc they were linked against.
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# Registry and target caches survive between builds; the binaries are copied out of the
# cached target directory in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p tas-operator -p tas-scheduler \
    && cargo build --profile node-agent --locked -p tas-updater \
    && mkdir -p /out \
    && cp target/release/tas-operator target/release/tas-scheduler target/node-agent/tas-updater /out/

# `make image-archives` (images/build.sh) assembles the same runtime from Debian
# packages without a container engine; e2e/tests/images.rs checks that both set the same
# user, entrypoint and labels.
FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/tas-dev/tas" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
USER 65532:65532

FROM runtime AS operator
LABEL org.opencontainers.image.title="tas-operator"
COPY --from=build /out/tas-operator /usr/local/bin/tas-operator
ENTRYPOINT ["/usr/local/bin/tas-operator"]

FROM runtime AS scheduler
LABEL org.opencontainers.image.title="tas-scheduler"
COPY --from=build /out/tas-scheduler /usr/local/bin/tas-scheduler
ENTRYPOINT ["/usr/local/bin/tas-scheduler"]

FROM runtime AS updater
LABEL org.opencontainers.image.title="tas-updater"
COPY --from=build /out/tas-updater /usr/local/bin/tas-updater
ENTRYPOINT ["/usr/local/bin/tas-updater"]
