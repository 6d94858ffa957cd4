//! `tas-operator uninstall`: what the Helm chart's uninstall hooks run.
//!
//! - [`uninstall`] (pre-delete, before Helm removes the operator): deletes every
//!   TopologyAwareScheduling object and waits until each is gone, that is until the
//!   running operator has removed its operands and taken its `tas.dev/cleanup` finalizer
//!   off (reconcile/finalizer).
//! - [`delete_leases`] (post-delete, once Helm has removed the operator): waits until no
//!   operator or scheduler pod is left in a namespace, then deletes their
//!   leader-election Leases there, which nothing else owns or removes.
//!
//! ```text
//! list objects ─► delete each ─► watch each until deleted (one deadline for all)
//! watch pods until none ─► delete the Leases tas-operator, tas-scheduler
//! ```
//!
//! The hooks' own ServiceAccount may do only that (docs/rbac.md, "ClusterRole
//! `tas-uninstall`").

use std::time::Duration;

use std::collections::BTreeSet;

use futures::TryStreamExt;
use futures::future::try_join_all;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tas_api::tas::TopologyAwareScheduling;

/// Why the objects could not be removed.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    /// Listing or deleting the objects failed.
    #[error("{action} TopologyAwareScheduling objects: {source}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// The API error.
        source: kube::Error,
    },
    /// Watching an object for its deletion failed.
    #[error("waiting for TopologyAwareScheduling {name} to be deleted: {source}")]
    Wait {
        /// The object.
        name: String,
        /// The watch error.
        source: kube::runtime::wait::Error,
    },
    /// Watching the pods of a namespace failed.
    #[error("watching the TAS pods of namespace {namespace}: {source}")]
    Pods {
        /// The namespace.
        namespace: String,
        /// The watch error.
        source: watcher::Error,
    },
    /// Deleting a Lease failed.
    #[error("deleting Lease {namespace}/{name}: {source}")]
    Lease {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: &'static str,
        /// The API error.
        source: kube::Error,
    },
    /// Pods of the operator or the scheduler were still there at the deadline.
    #[error("pods {pods} of namespace {namespace} still present after {timeout:?}")]
    PodsLeft {
        /// The namespace.
        namespace: String,
        /// The pods, comma-separated.
        pods: String,
        /// How long it waited.
        timeout: Duration,
    },
    /// An object was still there at the deadline: its finalizer was not removed.
    #[error(
        "TopologyAwareScheduling object(s) {names} still present after {timeout:?}: the \
         operator has not finished removing the operands (is it running? `kubectl describe \
         tas {first}` shows its conditions and Events)"
    )]
    Timeout {
        /// The objects left, comma-separated.
        names: String,
        /// The first of them.
        first: String,
        /// How long it waited.
        timeout: Duration,
    },
}

/// Deletes every TopologyAwareScheduling object and waits, up to `timeout` in all,
/// until they are gone. Returns the names of the objects it deleted.
pub async fn uninstall(client: Client, timeout: Duration) -> Result<Vec<String>, UninstallError> {
    let api: Api<TopologyAwareScheduling> = Api::all(client);
    let objects = api
        .list(&ListParams::default())
        .await
        .map_err(|source| UninstallError::Api {
            action: "listing",
            source,
        })?
        .items;
    let mut waits = Vec::new();
    let mut names = Vec::new();
    for object in &objects {
        let name = object.name_any();
        let uid = object.uid().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            // Deleted meanwhile by someone else: nothing to wait for.
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(source) => {
                return Err(UninstallError::Api {
                    action: "deleting",
                    source,
                });
            }
        }
        tracing::info!(object = %name, "deleted; waiting for the operator to remove the operands");
        let api = api.clone();
        let watched = name.clone();
        waits.push(async move {
            await_condition(api, &watched, conditions::is_deleted(&uid))
                .await
                .map(|_| ())
                .map_err(|source| UninstallError::Wait {
                    name: watched,
                    source,
                })
        });
        names.push(name);
    }
    match tokio::time::timeout(timeout, try_join_all(waits)).await {
        Ok(done) => done.map(|_| names),
        Err(_) => {
            let left: Vec<String> = api
                .list(&ListParams::default())
                .await
                .map(|l| l.items.iter().map(ResourceExt::name_any).collect())
                .unwrap_or_else(|_| names.clone());
            Err(UninstallError::Timeout {
                first: left.first().cloned().unwrap_or_default(),
                names: left.join(", "),
                timeout,
            })
        }
    }
}

/// The leader-election Leases of the operator (`tas-operator run --leader-elect`) and of
/// the scheduler (its config's `leaderElection.leaseName`).
pub const LEASES: [&str; 2] = ["tas-operator", "tas-scheduler"];
/// The pods that hold them.
const LEASE_HOLDERS: &str = "app.kubernetes.io/name in (tas-operator,tas-scheduler)";

/// Waits, up to `timeout`, until no operator or scheduler pod is left in `namespace`
/// (a standby could otherwise take a Lease again), then deletes their Leases there.
/// Returns the Leases it deleted.
pub async fn delete_leases(
    client: Client,
    namespace: &str,
    timeout: Duration,
) -> Result<Vec<&'static str>, UninstallError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut left = BTreeSet::new();
    let watch = async {
        let config = watcher::Config::default().labels(LEASE_HOLDERS);
        let mut stream = std::pin::pin!(watcher::watcher(pods, config));
        let mut synced = false;
        while let Some(event) = stream.try_next().await? {
            match event {
                Event::Init => left.clear(),
                Event::InitApply(pod) | Event::Apply(pod) => {
                    left.insert(pod.name_any());
                }
                Event::Delete(pod) => {
                    left.remove(&pod.name_any());
                }
                Event::InitDone => synced = true,
            }
            if synced && left.is_empty() {
                break;
            }
        }
        Ok::<_, watcher::Error>(())
    };
    match tokio::time::timeout(timeout, watch).await {
        Ok(watched) => watched.map_err(|source| UninstallError::Pods {
            namespace: namespace.to_owned(),
            source,
        })?,
        Err(_) => {
            return Err(UninstallError::PodsLeft {
                namespace: namespace.to_owned(),
                pods: left.into_iter().collect::<Vec<_>>().join(", "),
                timeout,
            });
        }
    }
    let leases: Api<Lease> = Api::namespaced(client, namespace);
    let mut deleted = Vec::new();
    for name in LEASES {
        match leases.delete(name, &DeleteParams::default()).await {
            Ok(_) => deleted.push(name),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(UninstallError::Lease {
                    namespace: namespace.to_owned(),
                    name,
                    source,
                });
            }
        }
    }
    Ok(deleted)
}
