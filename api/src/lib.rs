//! TAS API: the types every TAS component shares, and their validation.
//!
//! - [`tas`]: the `TopologyAwareScheduling` custom resource (group `tas.dev`), the one
//!   object a cluster admin applies to run the whole stack.
//! - [`nrt`]: `NodeResourceTopology` `v1alpha1`/`v1alpha2`, wire-compatible with the
//!   published CRD, plus typed readers for zones and Topology Manager attributes.
//! - [`fingerprint`]: the pod-set fingerprint shared by node agents and schedulers.
//! - [`labels`]: label selectors, parsed once and matched against label maps.
//! - [`quantity`]: Kubernetes quantities parsed to integers without panicking.
//! - [`config`]: the operands' command line and config file, rendered by the operator.
//! - [`duration`]: Go-style durations.
//! - [`hash`]: FNV-1a, for values that must not change between builds (config hashes,
//!   the scheduler's tie-break).
//! - [`crds`]: the CRD manifests generated from these types (what `make crds` writes).
//!
//! This crate does no I/O and holds no client.

pub mod config;
pub mod crds;
pub mod duration;
pub mod fingerprint;
pub mod hash;
pub mod labels;
pub mod nrt;
pub mod quantity;
pub mod tas;
