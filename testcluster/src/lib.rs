//! The test control plane (see the crate README): a real Kubernetes control plane run
//! as plain child processes, and helpers for tests against it. Depends on no TAS crate,
//! so every component crate can dev-depend on it.
//!
//! - [`TestCluster`] starts etcd and kube-apiserver, optionally
//!   kube-controller-manager, kube-scheduler and kwok, from the binaries
//!   `make cluster-tools` builds ([`Tools`]). [`TestCluster::shared`] is the one
//!   cluster every test of a binary shares; [`TestCluster::start`] makes a private one.
//! - Tests get a fresh [`kube::Client`] from [`TestCluster::client`], a namespace of
//!   their own from [`unique_namespace`], fake nodes from [`create_fake_node`] and the
//!   project's CRDs from [`apply_crds_from_dir`].
//! - [`audit::bindings`] reads which pod bindings the API server accepted, from the
//!   audit log a cluster started with [`ClusterOptions::audit_bindings`] writes.
//! - [`fault_proxy::FaultProxy`] stands in front of kube-apiserver for chosen clients
//!   and answers 429 or 503, or stalls, on request.
//! - Every wait polls a condition with a deadline: [`wait_for`].
//! - The TAS binaries' HTTPS endpoints are read with [`https_get`] and the admin's
//!   bearer token ([`TestCluster::admin_token`]).
//! - Acting as a ServiceAccount (tokens, clients with them, bindings, SubjectAccessReview
//!   checks) and admission-policy type checks: [`access`].
//! - Real nodes (containerd + a real kubelet in namespaces of their own, with a fake
//!   2-NUMA sysfs view): [`real_node::RealNode`].
//! - A scheduling test's namespace, node group, Guaranteed pods and NRT objects:
//!   [`scope`].

pub mod access;
pub mod audit;
mod cluster;
mod components;
mod crds;
mod credentials;
mod error;
mod events;
pub mod fault_proxy;
mod https;
mod kubeconfig;
mod namespace;
mod nodes;
mod objects;
mod pods;
mod ports;
mod process;
pub mod real_node;
pub mod scope;
mod tools;
mod wait;
mod watchdog;

pub use cluster::{ClusterOptions, KEEP_CLUSTER_ENV, LogGuard, TestCluster};
pub use crds::{FIELD_MANAGER, apply_crds_from_dir, crd_dir, read_crds};
pub use error::Error;
pub use events::{events_about, wait_event, wait_event_note};
pub use https::{get_over, https_get, insecure_tls_connector, tls_connect_insecure};
pub use namespace::{TEST_NAMESPACE_LABEL, unique_name, unique_namespace, wait_no_pods};
pub use nodes::{
    FakeNode, KWOK_NODE_ANNOTATION, KWOK_NODE_LABEL, create_fake_node, wait_node_ready,
    wait_node_schedulable,
};
pub use objects::create_or_keep;
pub use pods::{is_marked_unschedulable, wait_pod_running};
pub use ports::free_ports;
pub use process::{Component, tail_lines};
pub use tools::{
    BINARIES, KUBERNETES_VERSION, OLDEST_KUBERNETES_VERSION, TOOLS_BIN_ENV, TOOLS_BIN_OLDEST_ENV,
    Tools,
};
pub use wait::wait_for;

/// Pods carrying this label (value `"true"`) are left alone by kwok's `pod-ready` and
/// `pod-complete` stages, so a node simulator can decide whether they run or fail.
/// kwok still finishes their deletion.
pub const NODE_SIM_LABEL: &str = "tas.dev/node-sim";
