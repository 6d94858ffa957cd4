//! Runtime pieces shared by the TAS binaries.
//!
//! - [`lease`]: leader election on a `coordination.k8s.io/v1` Lease, with a cheap
//!   "am I leader" check for every action only the leader may take;
//! - [`http`]: the `/healthz`, `/readyz` and `/metrics` server;
//! - [`telemetry`]: logging setup;
//! - [`client`]: a kube client from an explicit kubeconfig or the environment;
//! - [`signals`]: the shutdown signal (SIGINT or SIGTERM).

pub mod client;
pub mod http;
pub mod lease;
pub mod signals;
pub mod telemetry;
