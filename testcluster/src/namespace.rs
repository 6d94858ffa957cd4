//! Test isolation on a shared cluster.
//!
//! Tests in one binary run in parallel against one cluster, so each test:
//! - works in a namespace of its own from [`unique_namespace`], and lists or watches
//!   namespaced objects only there;
//! - names cluster-scoped objects it creates (nodes, CRD instances) with
//!   [`unique_name`], and pins its pods to its own nodes, e.g. with a label on the
//!   nodes that the pods select (`nodeSelector`), so another test's pods cannot land
//!   on them;
//! - never deletes or changes what it did not create, and need not clean up: the
//!   cluster is thrown away after the run.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU32, Ordering};

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::{Error, wait_for};

/// Label put on every namespace [`unique_namespace`] creates.
pub const TEST_NAMESPACE_LABEL: &str = "e2e.tas.dev/test";

/// A DNS-1123 label unique within this process and unlikely to repeat across runs:
/// `<prefix>-<counter><random>`, with the prefix lowercased, other characters turned
/// into `-`, and cut so the whole fits in 63 characters.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = RandomState::new().hash_one(n) & 0xffff;
    let suffix = format!("{n}{random:04x}");
    let mut base: String = prefix
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .collect();
    base.truncate(63 - 1 - suffix.len());
    let base = base.trim_matches('-');
    if base.is_empty() {
        format!("t-{suffix}")
    } else {
        format!("{base}-{suffix}")
    }
}

/// Creates a fresh namespace for one test and returns its name.
///
/// Also creates its `default` ServiceAccount rather than waiting for
/// kube-controller-manager to: pods cannot be created before it exists, and clusters
/// without the controller-manager would never get it.
pub async fn unique_namespace(client: &Client, prefix: &str) -> Result<String, Error> {
    let name = unique_name(prefix);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(
                TEST_NAMESPACE_LABEL.into(),
                "true".into(),
            )])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await?;

    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
    let default = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("default".into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match accounts.create(&PostParams::default(), &default).await {
        Ok(_) => Ok(name),
        // The controller-manager was quicker.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(name),
        Err(e) => Err(e.into()),
    }
}

/// Waits until `namespace` has no pods left (none listed, terminating ones included).
pub async fn wait_no_pods(
    client: &Client,
    namespace: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    wait_for(
        format!("the pods of {namespace} to be gone"),
        timeout,
        || async {
            Ok::<_, kube::Error>(
                pods.list(&ListParams::default())
                    .await?
                    .items
                    .is_empty()
                    .then_some(()),
            )
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_distinct() {
        let a = unique_name("Deployment_Runs");
        let b = unique_name("Deployment_Runs");
        assert_ne!(a, b);
        assert!(a.starts_with("deployment-runs-"), "{a}");
        let long = unique_name(&"x".repeat(100));
        assert!(long.len() <= 63, "{long}");
        assert!(unique_name("--").starts_with("t-"));
        for name in [a, b, long] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            );
        }
    }
}
