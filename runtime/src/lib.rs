//! Runtime pieces shared by the TAS binaries.
//!
//! - [`lease`]: leader election on a `coordination.k8s.io/v1` Lease, with a cheap
//!   "am I leader" check for every action only the leader may take;
//! - [`http`]: the `/healthz`, `/readyz` and `/metrics` server;
//! - [`metrics`]: the Prometheus registry set-up and the `result` label;
//! - [`telemetry`]: logging setup and OpenTelemetry export over OTLP (all three binaries);
//! - [`client`]: a kube client from an explicit kubeconfig or the environment;
//! - [`signals`]: the shutdown signal (SIGINT or SIGTERM);
//! - [`shutdown`]: a deadline per shutdown step, and a runtime that does not wait
//!   for leftovers;
//! - [`supervise`]: named long-running tasks, the first to end or panic ends the
//!   process;
//! - [`cli`]: the flags every binary shares (kubeconfig, HTTP address, logging,
//!   identity), resolved by [`identity`] for who this replica is.

pub mod cli;
pub mod client;
pub mod http;
pub mod identity;
pub mod lease;
pub mod metrics;
pub mod shutdown;
pub mod signals;
pub mod supervise;
pub mod telemetry;
