//! `tas-operator`: runs the topology-aware scheduling stack from one
//! TopologyAwareScheduling object.
//!
//! ```text
//! watches/ ─────────────► controller.rs ─► reconcile/ ─┬─ validate/ (pure: refuse or resolve)
//!                                                      ├─ desired/ (pure: CR → objects)
//!                                                      ├─ apply, prune (SSA, labels)
//!                                                      ├─ status, conditions, events
//!                                                      └─ finalizer (uninstall)
//! ```
//!
//! - [`validate`] refuses what the operator cannot run (missing images, invalid or
//!   overlapping node groups), saying whether waiting can help, and resolves images and
//!   selectors; [`desired`] turns the validated object into the desired Kubernetes
//!   objects with pure functions; [`render`] prints them offline.
//! - [`controller::run_controller`] watches the object, its operands, nodes, node agent
//!   pods and NodeResourceTopology objects, and runs [`reconcile`] on relevant changes.
//! - [`node_groups`] computes which nodes each node group selects.
//! - [`operate()`] starts it all (HTTP endpoints, leader election, the controller): the
//!   binary and the tests start the operator the same way.
//! - [`metrics`] holds the Prometheus metrics and the readiness the binary serves;
//!   [`telemetry`] the logs and the OpenTelemetry export over OTLP.
//! - [`uninstall`] deletes the objects and waits for their cleanup (the Helm chart's
//!   pre-delete hook).

pub mod backoff;
pub mod context;
pub mod controller;
pub mod defaults;
pub mod desired;
pub mod error;
pub mod metrics;
pub mod node_groups;
mod operate;
pub mod reconcile;
pub mod render;
pub mod telemetry;
pub mod uninstall;
pub mod validate;
pub mod watches;

pub use context::{Config, Context, OperatorIdentity};
pub use controller::run_controller;
pub use error::Error;
pub use metrics::Metrics;
pub use operate::{InProcess, OperateError, Options, StopError, operate};
